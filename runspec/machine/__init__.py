"""The machine's end: deciding it (endgame), judging the disk for it (verdict), carrying it out
through the provider (finish), the failsafe that ends it when runspec cannot, and the host's
facts.
"""

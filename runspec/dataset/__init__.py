"""The dataset: staging it from the Hub, unpacking archives safely, and the tiny synthetic one the
demo and the tests train on.
"""

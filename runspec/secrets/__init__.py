"""The secrets a run needs: where they come from (the environment, the env file) and their
redaction from all that runspec prints, logs or pushes.
"""

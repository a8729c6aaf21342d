"""The spec: reading a YAML training spec, judging it against the schema and the rules, and the
typed Spec the rest of runspec reads (with LibreYOLO's model names).
"""

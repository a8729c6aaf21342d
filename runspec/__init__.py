"""runspec: declarative LibreYOLO training runs on rented GPU machines."""

__version__ = "0.1.0"

"""mur-roost: the host daemon that referees, launches and connects Murmur capsules."""

__version__ = "0.1.0"

"""`make bench`: what a plan costs to preview and how it grows with the number of failure domains."""

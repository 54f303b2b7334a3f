"""Campaigns across time: keeping them, comparing two, publishing a site."""

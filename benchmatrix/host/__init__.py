"""Code that runs on the hosts: the standard-library batch runner copied there. The controller never imports it."""

"""Tools that ship with the services: the regulator's ``audit``, the live ``dashboard`` and the
``punto-banco`` command (``cli``)."""

"""Watching the duplicates topic: ``state.py`` (what is known, pure), ``observer.py`` (reading
the topics without a group), ``app.py`` (the page and the JSON API), ``server.py`` (the
``streamdedup monitor`` process) and ``tail.py`` (one line per verdict in a terminal)."""

"""The fake Google APIs and stand-ins the tests drive (real servers on 127.0.0.1, importing nothing
of the product), and their own tests."""

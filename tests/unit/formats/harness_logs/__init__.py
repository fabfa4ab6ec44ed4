"""The harness logs' readers (proxy/formats/harness_logs): every reader over its real published
files in test_readers.py, what is one reader's own in its own module."""

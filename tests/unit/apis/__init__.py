"""Each API: requests real harnesses sent, and the answers rendered, against golden files."""

"""Request bodies -> Conversation, one module per API."""

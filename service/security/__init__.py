"""The server's own secrets and transport security: TLS contexts of its ports and the
admin password's hash."""

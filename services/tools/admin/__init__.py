"""What an administrator runs once or now and then, never a running service: the PostgreSQL
roles and schemas of ``db setup`` (``provisioning``), the services' signing keys and the shoe's
secret keys (``keys``), supervisors' keys and signed decisions (``supervisors``)."""

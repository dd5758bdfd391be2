"""The device bridge of one studio table as a service on the platform: device reads in,
``StudioRead`` out.

``punto-banco serve studio-bridge`` runs :func:`build_service`: no Kafka subscriber; its task
is the device link (``device.py``), which records each read of the table's device in the
bridge's own store (``studio-bridge.sqlite``, PostgreSQL schema ``settings.schema_name``), and
its outbox relay publishes each recorded read, signed with the bridge's key, on
``punto-banco.studio-reads`` keyed by table id. Its Kafka principal is ``studio-bridge``.
"""

from __future__ import annotations

from contracts import STUDIO_READS
from services.shared.platform.host import KafkaService, ServiceDefinition, serve
from services.shared.platform.settings import Settings, SettingsError
from services.studio_bridge.application import NAME, BridgeApplication
from services.studio_bridge.device import DeviceLink
from services.studio_bridge.messages import to_messages


class BridgeService(KafkaService[BridgeApplication]):
    """The bridge service, with its device link."""

    link: DeviceLink


def device_link(settings: Settings) -> DeviceLink:
    """The device link of ``settings`` (``PB_STUDIO_*``); SettingsError for a missing one."""
    if not settings.studio_table:
        raise SettingsError("PB_STUDIO_TABLE is not set: the table the device deals")
    if not settings.studio_device_port:
        raise SettingsError("PB_STUDIO_DEVICE_PORT is not set: the device's TCP port")
    return DeviceLink(
        settings.studio_table,
        settings.studio_device,
        settings.studio_device_host,
        settings.studio_device_port,
        settings.studio_silence,
    )


def build_service(settings: Settings, link: DeviceLink | None = None) -> BridgeService:
    """The bridge service of ``settings`` (``link``: its device link, else from settings)."""
    if settings.partitioned:
        raise SettingsError("the studio bridge serves one table: PB_PARTITIONED is not for it")
    link = link if link is not None else device_link(settings)
    service = BridgeService(
        ServiceDefinition(
            name=NAME,
            application=lambda env: BridgeApplication(env=env),
            to_messages=to_messages,
            tasks=[link.run],
        ),
        settings,
        description="The device bridge of a studio table: its card-reading shoe's reads, "
        "each once, in the device's order.",
    )
    service.link = link
    link.on_line = lambda outcome: service.metrics.device_lines.labels(outcome).inc()
    service.publisher(
        STUDIO_READS,
        description="Each read of the table's device once, in the device's order, and each "
        "gap in its sequence numbers (signed by the bridge).",
    )
    return service


def main() -> int:
    settings = Settings.from_env(NAME)
    return serve(build_service(settings), settings)


if __name__ == "__main__":
    raise SystemExit(main())

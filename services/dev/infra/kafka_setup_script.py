"""``deploy/k8s/kafka-setup.sh``: what `infra up` does to its broker, for a cluster's.

The script is rendered here from the same declarations `infra up` uses (``kafka_acls.py``: the
principals, the ACL matrix, the gateways' quota; ``kafka.py``: the project topics and their
configs) as commands of Kafka's own tools (``kafka-topics.sh``, ``kafka-acls.sh``,
``kafka-configs.sh``), so that the compose file and the Kubernetes Job set up a broker exactly
as the local one is. It runs as the cluster's admin (``KAFKA_SASL_USERNAME`` /
``KAFKA_SASL_PASSWORD``, the services' other ``KAFKA_*`` settings) and is idempotent: topics
made if missing, ACLs added (an existing one stays), quotas set, and a principal's SCRAM
credential set when its password is given (``PB_KAFKA_PASSWORD_<NAME>``). The operators are
fixed when it is rendered (``punto-banco infra kafka-script --operators ...``); the topic
prefix, partitions, replication factor and the gateways' byte rate are read when it runs.
``tests/unit/platform/test_platform_deploy.py`` holds the committed script to this and runs it
against stand-in tools.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from contracts import HOUSE, operator_topics
from services.dev.infra.kafka_acls import (
    GATEWAY_QUOTA,
    consumer_group,
    project_principals,
    role_for,
    role_quota,
)
from services.dev.infra.kafka_auth import ADMIN, SCRAM_MECHANISM
from services.dev.infra.kafka_principals import GATEWAY_BYTE_RATE
from services.shared.platform.kafka import PROJECT_TOPICS, topic_config

SCRIPT = "deploy/k8s/kafka-setup.sh"

_HEAD = """\
#!/bin/sh
# Sets up a Kafka cluster for punto-banco as `punto-banco infra up` sets up its own broker:
# the project topics, each principal's ACLs (deny by default: nothing else), the gateways'
# quotas, and the SCRAM credential of each principal whose PB_KAFKA_PASSWORD_<NAME> is set.
# Run as the cluster's admin (KAFKA_BOOTSTRAP_SERVERS, KAFKA_SECURITY_PROTOCOL,
# KAFKA_SASL_MECHANISM, KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD, KAFKA_SSL_CAFILE) with Kafka's
# tools in KAFKA_BIN (default /opt/kafka/bin, the apache/kafka image's); idempotent.
# Read when it runs: PB_TOPIC_PREFIX, PB_TOPIC_PARTITIONS (3), KAFKA_REPLICATION_FACTOR (1),
# {rate_variable} (bytes/s per gateway, 0: none; default {rate}).
# RENDERED by `punto-banco infra kafka-script --operators {operators}` from
# services/dev/infra/kafka_acls.py: do not edit, render it again (a test compares them).
set -eu
operators={operators}
if [ "${{PB_OPERATORS:-{house}}}" != "$operators" ]; then
    echo "kafka-setup.sh: made for PB_OPERATORS=$operators, not $PB_OPERATORS:" \\
        "run \\`punto-banco infra kafka-script --operators $PB_OPERATORS\\` for yours" >&2
    exit 2
fi
bin=${{KAFKA_BIN:-/opt/kafka/bin}}
bootstrap=${{KAFKA_BOOTSTRAP_SERVERS:?the brokers}}
p=${{PB_TOPIC_PREFIX:-}}
partitions=${{PB_TOPIC_PARTITIONS:-3}}
replicas=${{KAFKA_REPLICATION_FACTOR:-1}}
gateway_rate=${{{rate_variable}:-{rate}}}
umask 077
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
admin=$work/admin.properties
cat >"$admin" <<EOF
security.protocol=${{KAFKA_SECURITY_PROTOCOL:-SASL_PLAINTEXT}}
sasl.mechanism=${{KAFKA_SASL_MECHANISM:-{mechanism}}}
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="${{KAFKA_SASL_USERNAME:-{admin}}}" \
    password="${{KAFKA_SASL_PASSWORD:?the admin password}}";
EOF
if [ -n "${{KAFKA_SSL_CAFILE:-}}" ]; then
    printf 'ssl.truststore.type=PEM\\nssl.truststore.location=%s\\n' "$KAFKA_SSL_CAFILE" >>"$admin"
fi

topic() {{ # NAME [--config KEY=VALUE]...: made if missing
    name=$1
    shift
    "$bin/kafka-topics.sh" --bootstrap-server "$bootstrap" --command-config "$admin" --create \\
        --if-not-exists --topic "$p$name" --partitions "$partitions" \\
        --replication-factor "$replicas" "$@"
}}
allow() {{ # PRINCIPAL OPERATION [--resource-pattern-type prefixed] --topic T | --group G ...
    principal=$1
    operation=$2
    shift 2
    "$bin/kafka-acls.sh" --bootstrap-server "$bootstrap" --command-config "$admin" --add \\
        --allow-principal "User:$principal" --operation "$operation" "$@"
}}
scram() {{ # NAME PASSWORD: the principal's SCRAM credential (the password in a 0600 file)
    printf '{mechanism}=[iterations=8192,password=%s]\\n' "$2" >"$work/scram"
    "$bin/kafka-configs.sh" --bootstrap-server "$bootstrap" --command-config "$admin" --alter \\
        --entity-type users --entity-name "$1" --add-config-file "$work/scram"
}}
quota() {{ # NAME BYTES_PER_SECOND REQUEST_PERCENTAGE
    if [ "$2" = 0 ]; then
        "$bin/kafka-configs.sh" --bootstrap-server "$bootstrap" --command-config "$admin" \\
            --alter --entity-type users --entity-name "$1" --delete-config producer_byte_rate
        set -- "$1" "" "$3"
    fi
    "$bin/kafka-configs.sh" --bootstrap-server "$bootstrap" --command-config "$admin" --alter \\
        --entity-type users --entity-name "$1" \\
        --add-config "${{2:+producer_byte_rate=$2,}}request_percentage=$3"
}}
"""


def _wrapped(command: str, width: int = 100) -> str:
    """``command`` cut before its options (`` --``) into lines of at most ``width``."""
    lines: list[str] = []
    for part in command.split(" --"):
        if lines and len(lines[-1]) + len(part) + 3 <= width - 2:
            lines[-1] += " --" + part
        else:
            lines.append(("    --" if lines else "") + part)
    return " \\\n".join(lines)


def password_variable(principal: str) -> str:
    """The variable that gives ``principal`` its SCRAM password (a `-` in a name is `_`)."""
    return "PB_KAFKA_PASSWORD_" + principal.upper().replace("-", "_")


def setup_script(operators: Sequence[str] = (HOUSE,)) -> str:
    """The script for a deployment serving ``operators`` (see the module doc)."""
    served = tuple(dict.fromkeys(operators))
    principals = project_principals(served)
    lines = [
        _HEAD.format(
            operators=shlex.quote(",".join(served)),
            house=HOUSE,
            rate_variable=GATEWAY_BYTE_RATE,
            rate=GATEWAY_QUOTA.producer_byte_rate,
            mechanism=SCRAM_MECHANISM,
            admin=ADMIN,
        ),
        "# The project topics, with the configs the services need.",
    ]
    for topic in dict.fromkeys((*PROJECT_TOPICS, *operator_topics(served))):
        configs = [f"--config {key}={value}" for key, value in topic_config(topic).items()]
        lines.append(_wrapped(" ".join(["topic", topic, *configs])))
    lines += ["", "# Credentials given now (unset: left as they are)."]
    for name in principals:
        variable = password_variable(name)
        lines.append(f'[ -z "${{{variable}:-}}" ] || scram {name} "${variable}"')
    lines += ["", "# What each principal may do (kafka_acls.py's matrix)."]
    for name, role in principals.items():
        allowed = role_for(name, role, served)
        group = f'"${{p}}{consumer_group(name)}"'
        writes = " ".join(f'--topic "${{p}}{topic}"' for topic in allowed.writes)
        if writes:
            lines.append(_wrapped(f"allow {name} Write {writes}"))
        if allowed.reads:
            reads = " ".join(f'--topic "${{p}}{topic}"' for topic in allowed.reads)
            lines.append(_wrapped(f"allow {name} Read {reads} --group {group}"))
            prefixed = f'"${{p}}{consumer_group(name)}."'
            lines.append(f"allow {name} Read --resource-pattern-type prefixed --group {prefixed}")
    lines += ["", "# How much each principal may take of the brokers."]
    for name, role in principals.items():
        quota = role_quota(role)
        if quota is not None:
            rate = "$gateway_rate" if role == "gateway" else str(quota.producer_byte_rate)
            lines.append(f'quota {name} "{rate}" {quota.request_percentage}')
    lines.append('echo "kafka-setup.sh: the cluster is set up for operators $operators" >&2')
    return "\n".join(lines) + "\n"

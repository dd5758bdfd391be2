#!/bin/sh
# Sets up a Kafka cluster for punto-banco as `punto-banco infra up` sets up its own broker:
# the project topics, each principal's ACLs (deny by default: nothing else), the gateways'
# quotas, and the SCRAM credential of each principal whose PB_KAFKA_PASSWORD_<NAME> is set.
# Run as the cluster's admin (KAFKA_BOOTSTRAP_SERVERS, KAFKA_SECURITY_PROTOCOL,
# KAFKA_SASL_MECHANISM, KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD, KAFKA_SSL_CAFILE) with Kafka's
# tools in KAFKA_BIN (default /opt/kafka/bin, the apache/kafka image's); idempotent.
# Read when it runs: PB_TOPIC_PREFIX, PB_TOPIC_PARTITIONS (3), KAFKA_REPLICATION_FACTOR (1),
# PB_KAFKA_GATEWAY_BYTE_RATE (bytes/s per gateway, 0: none; default 1048576).
# RENDERED by `punto-banco infra kafka-script --operators house` from
# services/dev/infra/kafka_acls.py: do not edit, render it again (a test compares them).
set -eu
operators=house
if [ "${PB_OPERATORS:-house}" != "$operators" ]; then
    echo "kafka-setup.sh: made for PB_OPERATORS=$operators, not $PB_OPERATORS:" \
        "run \`punto-banco infra kafka-script --operators $PB_OPERATORS\` for yours" >&2
    exit 2
fi
bin=${KAFKA_BIN:-/opt/kafka/bin}
bootstrap=${KAFKA_BOOTSTRAP_SERVERS:?the brokers}
p=${PB_TOPIC_PREFIX:-}
partitions=${PB_TOPIC_PARTITIONS:-3}
replicas=${KAFKA_REPLICATION_FACTOR:-1}
gateway_rate=${PB_KAFKA_GATEWAY_BYTE_RATE:-1048576}
umask 077
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
admin=$work/admin.properties
cat >"$admin" <<EOF
security.protocol=${KAFKA_SECURITY_PROTOCOL:-SASL_PLAINTEXT}
sasl.mechanism=${KAFKA_SASL_MECHANISM:-SCRAM-SHA-512}
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
    username="${KAFKA_SASL_USERNAME:-admin}"     password="${KAFKA_SASL_PASSWORD:?the admin password}";
EOF
if [ -n "${KAFKA_SSL_CAFILE:-}" ]; then
    printf 'ssl.truststore.type=PEM\nssl.truststore.location=%s\n' "$KAFKA_SSL_CAFILE" >>"$admin"
fi

topic() { # NAME [--config KEY=VALUE]...: made if missing
    name=$1
    shift
    "$bin/kafka-topics.sh" --bootstrap-server "$bootstrap" --command-config "$admin" --create \
        --if-not-exists --topic "$p$name" --partitions "$partitions" \
        --replication-factor "$replicas" "$@"
}
allow() { # PRINCIPAL OPERATION [--resource-pattern-type prefixed] --topic T | --group G ...
    principal=$1
    operation=$2
    shift 2
    "$bin/kafka-acls.sh" --bootstrap-server "$bootstrap" --command-config "$admin" --add \
        --allow-principal "User:$principal" --operation "$operation" "$@"
}
scram() { # NAME PASSWORD: the principal's SCRAM credential (the password in a 0600 file)
    printf 'SCRAM-SHA-512=[iterations=8192,password=%s]\n' "$2" >"$work/scram"
    "$bin/kafka-configs.sh" --bootstrap-server "$bootstrap" --command-config "$admin" --alter \
        --entity-type users --entity-name "$1" --add-config-file "$work/scram"
}
quota() { # NAME BYTES_PER_SECOND REQUEST_PERCENTAGE
    if [ "$2" = 0 ]; then
        "$bin/kafka-configs.sh" --bootstrap-server "$bootstrap" --command-config "$admin" \
            --alter --entity-type users --entity-name "$1" --delete-config producer_byte_rate
        set -- "$1" "" "$3"
    fi
    "$bin/kafka-configs.sh" --bootstrap-server "$bootstrap" --command-config "$admin" --alter \
        --entity-type users --entity-name "$1" \
        --add-config "${2:+producer_byte_rate=$2,}request_percentage=$3"
}

# The project topics, with the configs the services need.
topic punto-banco.table-commands
topic punto-banco.bet-commands --config message.timestamp.type=LogAppendTime
topic punto-banco.shoe-commands
topic punto-banco.shoe-events --config message.timestamp.type=LogAppendTime
topic punto-banco.table-events
topic punto-banco.command-events
topic punto-banco.bet-events
topic punto-banco.book-events
topic punto-banco.dead-letters
topic punto-banco.incidents
topic punto-banco.seals --config retention.ms=-1 --config retention.bytes=-1 \
    --config cleanup.policy=delete
topic punto-banco.studio-reads

# Credentials given now (unset: left as they are).
[ -z "${PB_KAFKA_PASSWORD_SHOE:-}" ] || scram shoe "$PB_KAFKA_PASSWORD_SHOE"
[ -z "${PB_KAFKA_PASSWORD_DEALING:-}" ] || scram dealing "$PB_KAFKA_PASSWORD_DEALING"
[ -z "${PB_KAFKA_PASSWORD_SETTLEMENT:-}" ] || scram settlement "$PB_KAFKA_PASSWORD_SETTLEMENT"
[ -z "${PB_KAFKA_PASSWORD_GATEWAY:-}" ] || scram gateway "$PB_KAFKA_PASSWORD_GATEWAY"
[ -z "${PB_KAFKA_PASSWORD_STUDIO_BRIDGE:-}" ] || scram studio-bridge "$PB_KAFKA_PASSWORD_STUDIO_BRIDGE"
[ -z "${PB_KAFKA_PASSWORD_OPERATOR:-}" ] || scram operator "$PB_KAFKA_PASSWORD_OPERATOR"
[ -z "${PB_KAFKA_PASSWORD_SUPERVISOR:-}" ] || scram supervisor "$PB_KAFKA_PASSWORD_SUPERVISOR"
[ -z "${PB_KAFKA_PASSWORD_AUDITOR:-}" ] || scram auditor "$PB_KAFKA_PASSWORD_AUDITOR"
[ -z "${PB_KAFKA_PASSWORD_DASHBOARD:-}" ] || scram dashboard "$PB_KAFKA_PASSWORD_DASHBOARD"

# What each principal may do (kafka_acls.py's matrix).
allow shoe Write --topic "${p}punto-banco.dead-letters" --topic "${p}punto-banco.incidents" \
    --topic "${p}punto-banco.seals" --topic "${p}punto-banco.shoe-events"
allow shoe Read --topic "${p}punto-banco.shoe-commands" --topic "${p}punto-banco.studio-reads" \
    --group "${p}punto-banco-shoe"
allow shoe Read --resource-pattern-type prefixed --group "${p}punto-banco-shoe."
allow dealing Write --topic "${p}punto-banco.bet-commands" \
    --topic "${p}punto-banco.command-events" --topic "${p}punto-banco.dead-letters" \
    --topic "${p}punto-banco.incidents" --topic "${p}punto-banco.seals" \
    --topic "${p}punto-banco.shoe-commands" --topic "${p}punto-banco.table-events"
allow dealing Read --topic "${p}punto-banco.book-events" --topic "${p}punto-banco.shoe-events" \
    --topic "${p}punto-banco.table-commands" --group "${p}punto-banco-dealing"
allow dealing Read --resource-pattern-type prefixed --group "${p}punto-banco-dealing."
allow settlement Write --topic "${p}punto-banco.bet-events" --topic "${p}punto-banco.book-events" \
    --topic "${p}punto-banco.dead-letters" --topic "${p}punto-banco.incidents" \
    --topic "${p}punto-banco.seals"
allow settlement Read --topic "${p}punto-banco.bet-commands" --topic "${p}punto-banco.shoe-events" \
    --topic "${p}punto-banco.table-events" --group "${p}punto-banco-settlement"
allow settlement Read --resource-pattern-type prefixed --group "${p}punto-banco-settlement."
allow gateway Write --topic "${p}punto-banco.bet-commands" --topic "${p}punto-banco.dead-letters" \
    --topic "${p}punto-banco.incidents" --topic "${p}punto-banco.seals"
allow gateway Read --topic "${p}punto-banco.bet-events" --topic "${p}punto-banco.table-events" \
    --group "${p}punto-banco-gateway"
allow gateway Read --resource-pattern-type prefixed --group "${p}punto-banco-gateway."
allow studio-bridge Write --topic "${p}punto-banco.dead-letters" \
    --topic "${p}punto-banco.incidents" --topic "${p}punto-banco.seals" \
    --topic "${p}punto-banco.studio-reads"
allow operator Write --topic "${p}punto-banco.table-commands"
allow operator Read --topic "${p}punto-banco.command-events" \
    --topic "${p}punto-banco.table-events" --group "${p}punto-banco-operator"
allow operator Read --resource-pattern-type prefixed --group "${p}punto-banco-operator."
allow supervisor Write --topic "${p}punto-banco.table-commands"
allow supervisor Read --topic "${p}punto-banco.command-events" \
    --topic "${p}punto-banco.table-events" --group "${p}punto-banco-supervisor"
allow supervisor Read --resource-pattern-type prefixed --group "${p}punto-banco-supervisor."
allow auditor Read --topic "${p}punto-banco.bet-commands" --topic "${p}punto-banco.bet-events" \
    --topic "${p}punto-banco.book-events" --topic "${p}punto-banco.command-events" \
    --topic "${p}punto-banco.dead-letters" --topic "${p}punto-banco.incidents" \
    --topic "${p}punto-banco.seals" --topic "${p}punto-banco.shoe-commands" \
    --topic "${p}punto-banco.shoe-events" --topic "${p}punto-banco.studio-reads" \
    --topic "${p}punto-banco.table-commands" --topic "${p}punto-banco.table-events" \
    --group "${p}punto-banco-auditor"
allow auditor Read --resource-pattern-type prefixed --group "${p}punto-banco-auditor."
allow dashboard Read --topic "${p}punto-banco.bet-commands" --topic "${p}punto-banco.bet-events" \
    --topic "${p}punto-banco.book-events" --topic "${p}punto-banco.command-events" \
    --topic "${p}punto-banco.dead-letters" --topic "${p}punto-banco.incidents" \
    --topic "${p}punto-banco.seals" --topic "${p}punto-banco.shoe-commands" \
    --topic "${p}punto-banco.shoe-events" --topic "${p}punto-banco.studio-reads" \
    --topic "${p}punto-banco.table-commands" --topic "${p}punto-banco.table-events" \
    --group "${p}punto-banco-dashboard"
allow dashboard Read --resource-pattern-type prefixed --group "${p}punto-banco-dashboard."

# How much each principal may take of the brokers.
quota gateway "$gateway_rate" 50
echo "kafka-setup.sh: the cluster is set up for operators $operators" >&2

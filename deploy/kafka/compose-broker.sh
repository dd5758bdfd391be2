#!/bin/sh
# The broker of deploy/compose.yaml (the apache/kafka image, one KRaft node), authenticating as
# the one of `punto-banco infra up` does (services/dev/infra/kafka_auth.py): SASL/SCRAM-SHA-512
# on its listeners for clients (INTERNAL: the compose network; EXTERNAL: published on the
# host's 127.0.0.1), the controller's on the container's loopback with SASL/PLAIN as the admin,
# StandardAuthorizer denying what no ACL allows, `admin` the only super user. Its SCRAM users
# (the admin and every principal of services/dev/infra/kafka_acls.py) are made when the storage
# is formatted (`kafka-storage format --add-scram`), each with the password of
# PB_KAFKA_PASSWORD_<NAME>; a formatted volume is started as it is. The ACLs, topics and quotas
# are the one-shot kafka-setup's (deploy/k8s/kafka-setup.sh). The broker's config and the
# admin's client config (the healthcheck's), which hold its password, are written 0600. Paths and ports: the variables below (defaults:
# compose's; tests/integration/infra/test_infra_compose_broker.py runs it with its own).
set -eu
umask 077
bin=${KAFKA_BIN:-/opt/kafka/bin}
data=${KAFKA_DATA_DIR:-/var/lib/kafka/data}
config=${KAFKA_CONFIG_FILE:-/tmp/punto-banco/server.properties}
internal=${KAFKA_INTERNAL_PORT:-19092}
external=${KAFKA_EXTERNAL_PORT:-9092}
controller=${KAFKA_CONTROLLER_PORT:-9093}
host=${KAFKA_ADVERTISED_HOST:-kafka}
published=${KAFKA_PUBLISHED_HOST:-127.0.0.1}
admin=${PB_KAFKA_PASSWORD_ADMIN:?set it in deploy/.env (compose.yaml says how)}
principals="admin shoe dealing settlement gateway studio-bridge operator supervisor auditor dashboard"

scram() { # the JAAS line of the admin's SCRAM login
    printf 'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="%s";' "$admin"
}
mkdir -p "$(dirname "$config")" "$data"
cat >"$config" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:$controller
listeners=INTERNAL://:$internal,EXTERNAL://:$external,CONTROLLER://localhost:$controller
advertised.listeners=INTERNAL://$host:$internal,EXTERNAL://$published:$external
listener.security.protocol.map=INTERNAL:SASL_PLAINTEXT,EXTERNAL:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT
inter.broker.listener.name=INTERNAL
controller.listener.names=CONTROLLER
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.internal.scram-sha-512.sasl.jaas.config=$(scram)
listener.name.external.scram-sha-512.sasl.jaas.config=$(scram)
sasl.mechanism.controller.protocol=PLAIN
listener.name.controller.sasl.enabled.mechanisms=PLAIN
listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="$admin" user_admin="$admin";
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:admin
auto.create.topics.enable=false
log.dirs=$data
num.partitions=3
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
# The admin's client config, for the healthcheck (kafka-broker-api-versions.sh).
cat >"$(dirname "$config")/admin.properties" <<EOF
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=$(scram)
EOF

if [ ! -f "$data/meta.properties" ]; then
    # Each principal's password from PB_KAFKA_PASSWORD_<NAME>: on kafka-storage's command line
    # while it formats, inside this container only.
    set --
    for name in $principals; do
        variable=PB_KAFKA_PASSWORD_$(echo "$name" | tr '[:lower:]-' '[:upper:]_')
        eval "password=\${$variable:-}"
        if [ -z "$password" ]; then
            echo "compose-broker.sh: set $variable in deploy/.env (compose.yaml says how)" >&2
            exit 2
        fi
        set -- "$@" --add-scram "SCRAM-SHA-512=[name=$name,iterations=8192,password=$password]"
    done
    cluster=$("$bin/kafka-storage.sh" random-uuid)
    "$bin/kafka-storage.sh" format --cluster-id "$cluster" --config "$config" --ignore-formatted \
        "$@"
fi
exec "$bin/kafka-server-start.sh" "$config"

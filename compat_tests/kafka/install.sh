#!/usr/bin/env bash
# Puts the Kafka broker the notification test (compat_tests/tests/notify_kafka.rs) runs into a
# cache outside the clone: the jars of pom.xml's Kafka and their runtime dependencies, from
# Maven Central, in $SAKER_KAFKA_HOME (default ~/.cache/saker-kafka/<version>)/libs, and the
# log4j2 configuration the test starts it with. Does nothing if they are there. Needs java
# (17+) and mvn; prints the directory.
#
# usage: install.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/pom.xml")
home=${SAKER_KAFKA_HOME:-$HOME/.cache/saker-kafka/$version}

for tool in java mvn; do
  command -v "$tool" >/dev/null || {
    echo "install.sh: $tool is missing (apt-get install openjdk-17-jre-headless maven)" >&2
    exit 1
  }
done

if [ ! -f "$home/libs/.complete" ]; then
  rm -rf "$home/libs.tmp"
  mkdir -p "$home"
  (cd "$here" && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$home/libs.tmp" >&2)
  touch "$home/libs.tmp/.complete"
  rm -rf "$home/libs"
  mv "$home/libs.tmp" "$home/libs"
fi
cp "$here/log4j2.yaml" "$home/log4j2.yaml"
echo "$home"

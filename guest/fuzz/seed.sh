#!/bin/sh
# Writes the seed corpora (corpus/<target>/seed-*) from the upstream fixtures in
# tests/upstream/fixtures/draft. Needs jq. The seeds are committed; rerun after the
# fixtures change.
#   registration: every registration fixture, as it is.
#   event:        `params.event` of every fixture message that carries one.
#   response:     every reply fixture (one with `result` or `error`), its id set to
#                 `evt1`, the id the response target expects.
set -eu
cd "$(dirname "$0")"
fixtures=../../tests/upstream/fixtures/draft
rm -f corpus/*/seed-*
mkdir -p corpus/registration corpus/event corpus/response
for f in "$fixtures"/registration/*.json; do
    cp "$f" "corpus/registration/seed-$(basename "$f")"
done
for f in "$fixtures"/http/* "$fixtures"/stdio/*; do
    name=$(basename "$f")
    jq -ce 'select(type == "object" and (.params.event | type) == "object") | .params.event' \
        "$f" >"corpus/event/seed-$name" 2>/dev/null || rm -f "corpus/event/seed-$name"
    jq -ce 'select(type == "object" and (has("result") or has("error"))) | .id = "evt1"' \
        "$f" >"corpus/response/seed-$name" 2>/dev/null || rm -f "corpus/response/seed-$name"
done
for target in registration event response; do
    echo "$target: $(ls corpus/$target | wc -l) seeds"
done

#!/bin/sh
# Ships order o-1 with curl; if the request fails, sends it once more. With "idempotent", both attempts
# carry the same idempotency-key, so the API commits the order once whatever happens to the answers.
#   examples/faults/ship.sh http://127.0.0.1:4010 [idempotent]
api="${1:-http://127.0.0.1:4010}"
key=""
[ "$2" = "idempotent" ] && key="idempotency-key: order-o-1"
send() {
  curl -sS -X POST -H 'content-type: application/json' ${key:+-H "$key"} \
    -d '{"orderId":"o-1","rateId":"r-economy"}' "$api/shipments"
}
send || send
echo

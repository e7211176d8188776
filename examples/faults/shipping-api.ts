/**
 * The lab's shipping API on a fixed port, for the faults walkthrough in docs/faults.md: it creates shipments,
 * honours an `idempotency-key`, and prints every shipment it commits, so you can compare what the API did
 * with what the client was told.
 *   node --conditions=tool-replay-source examples/faults/shipping-api.ts 4010
 */
// The lab (the CLI's `demo`) is not a package subpath: this example runs from the checkout and imports it there.
import { startShippingApi } from '../../lab/index.ts'

const port = Number(process.argv[2] ?? 4010)
const api = await startShippingApi({ port })
let printed = 0
// The ledger is the API's own: print each new entry as it appears.
const timer = setInterval(() => {
  for (; printed < api.shipments.length; printed++) {
    const s = api.shipments[printed]
    if (s) console.log(`api committed shipment ${s.id} for order ${s.orderId}`)
  }
}, 20)
console.log(`shipping API on ${api.url} (Ctrl-C to stop)`)
const stop = async () => {
  clearInterval(timer)
  await api.close()
}
process.once('SIGINT', stop)
process.once('SIGTERM', stop)

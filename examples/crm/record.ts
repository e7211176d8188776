/**
 * Step 1 of the CRM story: start the fake CRM, run the app once while recording every exchange into the
 * store as trace "crm" (or --trace NAME), then stop the CRM. Nothing after this step talks to it.
 *   node --conditions=tool-replay-source examples/crm/record.ts [--trace crm] [--store DIR]
 */
import { parseArgs } from 'node:util'
import { openStore } from 'tool-replay/store'
import { decideCustomer42 } from './app.ts'
import { startFakeCrm } from './crm-server.ts'
import { withInterceptor } from './session.ts'

const { values } = parseArgs({ options: { trace: { type: 'string', default: 'crm' }, store: { type: 'string' } } })
const store = await openStore(values.store ?? process.env.TOOL_REPLAY_STORE ?? '.tool-replay/store')
const crm = await startFakeCrm()
try {
  const run = await withInterceptor({ mode: 'record', trace: values.trace, store, upstream: crm.agent() }, decideCustomer42)
  if (run.error) throw run.error
  console.log(`decision: ${run.result}`)
  console.log(`recorded trace "${values.trace}" (${run.summary.recorded} exchange(s)); the CRM saw: ${crm.requests.join(', ')}`)
} finally {
  await crm.close()
  await store.close()
}

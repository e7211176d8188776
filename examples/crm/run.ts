/**
 * Runs the app against a trace in strict replay: no network at all (the fake CRM is not running).
 * With --record-as, what the app did is kept as another trace, for `tr-proxy diff`.
 *   node --conditions=tool-replay-source examples/crm/run.ts --trace crm-inactive [--record-as crm-observed] [--store DIR]
 * Exits 0 with the decision on stdout; 6 when strict replay failed (an unrecorded or unused request).
 */
import { parseArgs } from 'node:util'
import { formatSummary } from 'tool-replay/engine'
import { openStore } from 'tool-replay/store'
import { decideCustomer42 } from './app.ts'
import { withInterceptor } from './session.ts'

const { values } = parseArgs({ options: { trace: { type: 'string', default: 'crm' }, 'record-as': { type: 'string' }, store: { type: 'string' } } })
const store = await openStore(values.store ?? process.env.TOOL_REPLAY_STORE ?? '.tool-replay/store')
try {
  const run = await withInterceptor(
    { mode: 'replay', trace: values.trace, store, ...(values['record-as'] ? { recordAs: values['record-as'] } : {}) },
    decideCustomer42,
  )
  if (!run.summary.ok) {
    console.error(formatSummary(run.summary))
    process.exitCode = 6
  } else if (run.error) {
    console.error(`the app failed: ${(run.error as Error).message}`)
    process.exitCode = 1
  } else {
    console.log(`decision: ${run.result}`)
  }
} finally {
  await store.close()
}

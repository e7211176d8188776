/**
 * Records or replays the MCP agent (the library path: install() in this process; the agent's `tr-proxy mcp`
 * children join its session).
 *   node --conditions=tool-replay-source examples/mcp-agent/run.ts --record            # record (starts the fake model)
 *   node --conditions=tool-replay-source examples/mcp-agent/run.ts [--trace NAME] [--record-as NAME]   # strict replay, offline
 * Prints what the agent did; exits 69 when strict replay failed, 1 when the reply was not saved.
 */
import { parseArgs } from 'node:util'
import { EXIT_CODES } from 'tool-replay/cli'
import { formatSummary } from 'tool-replay/engine'
import { install } from 'tool-replay/interceptor'
import { openStore } from 'tool-replay/store'
import { ErrorCodes } from 'tool-replay/trace'
import { triageTicket } from './agent.ts'
import { modelAgent, startFakeModel } from './fake-model.ts'

const { values } = parseArgs({
  options: {
    record: { type: 'boolean', default: false },
    trace: { type: 'string', default: 'mcp-agent' },
    'record-as': { type: 'string' },
    store: { type: 'string' },
  },
})
const store = await openStore(values.store ?? process.env.TOOL_REPLAY_STORE ?? '.tool-replay/store')
const model = values.record ? await startFakeModel() : undefined
const upstream = model ? modelAgent(model.port) : undefined
try {
  const tr = await install({
    mode: values.record ? 'record' : 'replay',
    trace: values.trace,
    store,
    ...(upstream ? { upstream } : {}),
    ...(values['record-as'] ? { recordAs: values['record-as'] } : {}),
  })
  let result: Awaited<ReturnType<typeof triageTicket>> | undefined
  let error: unknown
  try {
    result = await triageTicket()
  } catch (err) {
    error = err
  }
  const summary = await tr.close()
  if (result) console.log(`${result.outcome}: ${result.detail}`)
  if (values.record) console.log(`recorded trace "${values.trace}" (${summary.recorded} exchanges)`)
  if (!summary.ok) {
    console.error(formatSummary(summary))
    process.exitCode = EXIT_CODES[ErrorCodes.REPLAY_INCOMPLETE]
  } else if (error) {
    console.error(`the agent failed: ${(error as Error).message}`)
    process.exitCode = 1
  } else if (result?.outcome !== 'reply saved') process.exitCode = 1
} finally {
  await upstream?.close()
  await model?.close()
  await store.close()
}

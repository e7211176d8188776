/**
 * Child-process entry for `verifyCase` (see run-runner.ts): `node runner-process.js CASE_DIR` checks the
 * case, runs its runner under strict replay in this fresh realm (where Node's fetch reads the dispatcher the
 * interceptor installs), and sends the outcome to the parent over IPC.
 */
import { isToolReplayError } from '../trace/index.ts'
import { outcomeMessage, runRunner } from './run-runner.ts'
import { checkCaseIntegrity } from './verify.ts'

const send = (m: unknown) => new Promise<void>((resolve) => (process.send ? process.send(m, () => resolve()) : resolve()))

try {
  const c = await checkCaseIntegrity(process.argv[2] as string)
  if (c.manifest.run.kind !== 'runner') throw new Error(`case ${c.dir} is not a runner case`)
  await send(outcomeMessage(await runRunner(c, c.manifest.run)))
} catch (err) {
  if (!isToolReplayError(err)) throw err
  await send({ fatal: { code: err.code, message: err.message } })
}
// The app may leave timers or sockets behind; the outcome is sent, so nothing here needs them.
process.exit(0)

/**
 * Quickstart: record the example app once against live (fake) APIs, stop them, then replay the
 * run strictly offline from the default embedded store (./.tool-replay/store).
 *   npm run demo
 */
import { install } from 'tool-replay/interceptor'
import { defaultStoreDir } from 'tool-replay/store'
import { advise } from './app.ts'
import { startFakeApi } from './fake-api.ts'

// No store given: install() opens the default embedded store and closes it again in close().
const trace = 'quickstart'
const api = await startFakeApi()
try {
  const recording = await install({ mode: 'record', trace })
  const recorded = await advise(api.url, 'Oslo')
  const recSummary = await recording.close()
  await api.close()

  console.log(`record: "${recorded}" (${recSummary.recorded} exchanges written to ${defaultStoreDir()}, trace "${trace}")`)

  // The API is stopped now: replay can only succeed from the recording.
  const replaying = await install({ mode: 'replay', trace })
  const replayed = await advise(api.url, 'Oslo')
  replaying.assertDone()
  const repSummary = await replaying.close()
  console.log(`replay: "${replayed}" (${repSummary.replayed} exchanges replayed; the API was stopped, so nothing could reach it)`)
  if (replayed !== recorded) throw new Error('replay differs from the recording')
  console.log('ok: strict replay matched the recording with the API offline. Inspect it: node bin/tr-proxy.js show quickstart')
} finally {
  await api.close()
}

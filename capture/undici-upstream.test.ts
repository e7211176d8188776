import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Agent, type Dispatcher } from 'undici'
import { LazyAgent, type Undici } from './undici-upstream.ts'

/** A LazyAgent over the real undici whose import the test releases by hand, and the Agents it made. */
function gatedAgent(): { lazy: LazyAgent; release: () => void; fail: (err: Error) => void; made: Agent[] } {
  let release!: () => void
  let fail!: (err: Error) => void
  const loaded = new Promise<Undici>((resolve, reject) => {
    release = () => void import('undici').then(resolve, reject)
    fail = reject
  })
  const made: Agent[] = []
  const lazy = new LazyAgent(
    (undici) => {
      const agent = new undici.Agent()
      made.push(agent)
      return agent
    },
    () => loaded,
  )
  return { lazy, release, fail, made }
}

test('LazyAgent makes one Agent at first use; once made, use runs at once and returns what forward returns', async () => {
  const { lazy, release, made } = gatedAgent()
  const seen: Dispatcher[] = []
  assert.equal(
    lazy.use(
      (a) => seen.push(a),
      (err) => assert.fail(err),
    ),
    undefined,
  )
  lazy.use(
    (a) => seen.push(a),
    (err) => assert.fail(err),
  )
  assert.equal(made.length, 0, 'nothing is made before undici has loaded')
  release()
  await lazy.close()
  assert.equal(made.length, 1)
  assert.deepEqual(seen, [made[0], made[0]], 'both waiting forwards got the one Agent, in order')
  assert.ok(made[0] instanceof Agent)
  assert.equal(
    lazy.use(
      (a) => a === made[0],
      () => {},
    ),
    true,
    'sync once made',
  )
})

test('LazyAgent.close() while undici loads waits for the Agent, after the forwards that waited for it', async () => {
  const { lazy, release, made } = gatedAgent()
  const order: string[] = []
  lazy.use(
    (a) => order.push(`forward closed=${(a as Agent).closed}`),
    (err) => assert.fail(err),
  )
  const closing = lazy.close().then(() => order.push('closed'))
  release()
  await closing
  assert.deepEqual(order, ['forward closed=false', 'closed'])
  assert.equal(made[0]?.closed, true)
})

test('LazyAgent: a failed import reaches fail, and close() then resolves; a forward that throws later reaches fail', async () => {
  const { lazy, fail } = gatedAgent()
  const failures: string[] = []
  lazy.use(
    () => assert.fail('no Agent without undici'),
    (err) => failures.push(err.message),
  )
  fail(new Error('no undici here'))
  await lazy.close()
  assert.deepEqual(failures, ['no undici here'])

  const g = gatedAgent()
  g.lazy.use(
    () => {
      throw new Error('dispatch threw')
    },
    (err) => failures.push(err.message),
  )
  g.release()
  await g.lazy.close()
  assert.deepEqual(failures, ['no undici here', 'dispatch threw'])
  const nothing = new LazyAgent(() => assert.fail('never made'))
  await nothing.close()
  await nothing.destroy(null)
})

/**
 * gc's waits for the store's other writers are bounded (store/gc.ts): a write queue that does not move, or a piece
 * write that does not end, makes gc fail with TR_STORE_LOCKED in time, having deleted nothing it should not, and
 * leaving no hold on piece writes behind. Fake timing at the store level: the target's queue and hold are gates
 * the test opens.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { ErrorCodes, isToolReplayError } from '../trace/index.ts'
import { collectGarbage, type GcTarget } from './gc.ts'
import type { KvRange } from './store-reads.ts'

const root = await mkdtemp(join(tmpdir(), 'tr-gc-'))
after(() => rm(root, { recursive: true, force: true }))

const DEAD = `b!${'d'.repeat(64)}`

/** A gate: a promise the test opens. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open = () => {}
  const wait = new Promise<void>((resolve) => {
    open = resolve
  })
  return { wait, open }
}

/** A store holding one body no exchange references; `exclusive` and `holdPieces` as the test says. */
function target(over: Partial<GcTarget>): GcTarget & { keys: Map<string, Uint8Array>; deleted: string[] } {
  const keys = new Map<string, Uint8Array>([[DEAD, new Uint8Array(3)]])
  const deleted: string[] = []
  return {
    keys,
    deleted,
    kv: {
      get: async (key) => keys.get(key),
      async scan(r: KvRange, visit) {
        for (const [k, v] of [...keys].sort(([a], [b]) => (a < b ? -1 : 1))) {
          if ((r.gte !== undefined && k < r.gte) || k >= r.lt) continue
          if (visit(k, v) === false) return
        }
      },
    },
    piecesDir: join(root, 'pieces'),
    dryRun: false,
    referencedSince: new Set(),
    exclusive: (fn) => fn(),
    deleteKeys: async (dead) => {
      for (const k of dead) keys.delete(k)
      deleted.push(...dead)
    },
    holdPieces: async () => () => {},
    waitMs: 100,
    ...over,
  }
}

test('gc with nothing in its way removes the body nothing references', async () => {
  const t = target({})
  const report = await collectGarbage(t)
  assert.equal(report.bodies, 1)
  assert.deepEqual(t.deleted, [DEAD])
})

test('gc gives up on a write queue that does not move: TR_STORE_LOCKED in time, and nothing deleted when it moves later', { timeout: 10_000 }, async () => {
  const queue = gate()
  const t = target({ exclusive: (fn) => queue.wait.then(fn) })
  const began = Date.now()
  await assert.rejects(collectGarbage(t), (err) => {
    assert.ok(isToolReplayError(err, ErrorCodes.STORE_LOCKED), String(err))
    assert.match(err.message, /gc waited 100 ms for the writes queued before it and they did not finish, so it removed nothing\. Run `tr-proxy gc` again/)
    return true
  })
  assert.ok(Date.now() - began < 5000, 'gave up near its bound')
  // The queue reaches gc's turn after gc gave up: it is skipped, not run half-abandoned.
  queue.open()
  await delay(20)
  assert.deepEqual(t.deleted, [])
  assert.ok(t.keys.has(DEAD))
})

test('gc gives up on piece writes that do not end, and releases the hold when it is granted late', { timeout: 10_000 }, async () => {
  const inFlight = gate()
  let released = 0
  const t = target({
    holdPieces: async () => {
      await inFlight.wait
      return () => {
        released++
      }
    },
  })
  await assert.rejects(collectGarbage(t), (err) => {
    assert.ok(isToolReplayError(err, ErrorCodes.STORE_LOCKED), String(err))
    assert.match(err.message, /waited 100 ms for the piece writes in flight and they did not finish, so it removed unreferenced bodies but no piece files/)
    return true
  })
  assert.equal(released, 0)
  inFlight.open()
  await delay(20)
  assert.equal(released, 1, 'new piece writes are not held by a gc that gave up')
})

/**
 * A sealed run of Python `requests` with `trust_env=False` (it reads no proxy variable): recorded, then strictly
 * replayed with the upstreams STOPPED and counting listeners at 0; identical outputs. Skips, saying why, without
 * python3 and requests.
 */
import assert from 'node:assert/strict'
import { before, describe, test } from 'node:test'
import { cannotSeal, EXPECTED, has, recordThenReplay, sealedWork, URLS } from './support/sealed-harness.ts'

let work: Awaited<ReturnType<typeof sealedWork>>
let skip: string | undefined

before(async () => {
  skip = await cannotSeal()
  work = await sealedWork('tr-sealed-python-')
})

// trust_env=False: requests reads no proxy variable (and no REQUESTS_CA_BUNDLE: the bundle is given as a user would).
const PYTHON_CLIENT = `
import os, sys, requests
s = requests.Session()
s.trust_env = False
for u in sys.argv[1:]:
    r = s.get(u, timeout=20, verify=os.environ['SSL_CERT_FILE'])
    sys.stdout.write(str(r.status_code) + ' ' + r.text)
`

describe('sealed runs: Python', { timeout: 300_000 }, () => {
  test('Python requests with trust_env=False', async (t) => {
    if (skip) return t.skip(skip)
    const missing = has('python3', ['-c', 'import requests'])
    if (missing) return t.skip(`python3 with requests is not installed (${missing})`)
    const { recorded, replayed } = await recordThenReplay(work.store, work.pki, 'python', ['python3', '-c', PYTHON_CLIENT, ...URLS])
    assert.equal(recorded, EXPECTED.join(''))
    assert.equal(replayed, recorded)
  })
})

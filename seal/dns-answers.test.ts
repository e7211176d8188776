import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import dnsPacket, { type Answer, type DecodedPacket, type RecordType } from 'dns-packet'
import { answerQuery, FakeNames, MAX_FAKE_NAMES } from './dns-answers.ts'

function query(name: string, type: RecordType, id = 4242): Buffer {
  return dnsPacket.encode({ type: 'query', id, flags: dnsPacket.RECURSION_DESIRED, questions: [{ type, name, class: 'IN' }] })
}

function ask(names: FakeNames, name: string, type: RecordType): DecodedPacket {
  const answer = answerQuery(query(name, type), names)
  assert.ok(answer, `an answer for ${type} ${name}`)
  return dnsPacket.decode(answer)
}

const data = (a: Answer | undefined) => (a as { data?: unknown } | undefined)?.data
/** The response code (dns-packet decodes it; its types leave it out). */
const rcode = (r: DecodedPacket) => (r as DecodedPacket & { rcode?: string }).rcode

describe('fake names', () => {
  test('each name gets its own address in 198.18.0.0/15, the same one every time, any case, trailing dot or not', () => {
    const names = new FakeNames()
    const a = names.addressOf('api.openai.com')
    const b = names.addressOf('example.test')
    assert.match(a, /^198\.1[89]\.\d+\.\d+$/)
    assert.notEqual(a, b)
    assert.equal(names.addressOf('API.OpenAI.com.'), a)
    assert.equal(names.nameOf(a), 'api.openai.com')
    assert.equal(names.nameOf('198.19.255.1'), undefined)
  })

  test('addresses skip .0 and .255 (some clients refuse them) and run out with a clear error after MAX_FAKE_NAMES', () => {
    const names = new FakeNames()
    const seen = new Set<string>()
    for (let i = 0; i < 600; i++) {
      const address = names.addressOf(`n${i}.test`)
      assert.ok(!/\.(0|255)$/.test(address), address)
      seen.add(address)
    }
    assert.equal(seen.size, 600)
    const small = new FakeNames(2)
    small.addressOf('a.test')
    small.addressOf('b.test')
    assert.equal(small.addressOf('a.test'), small.addressOf('a.test'))
    assert.throws(() => small.addressOf('c.test'), /at most 2 names/)
    assert.ok(MAX_FAKE_NAMES > 100_000)
  })
})

describe('DNS answers', () => {
  test('A: the fake address, id and question echoed, recursion available, no error', () => {
    const names = new FakeNames()
    const r = ask(names, 'api.openai.com', 'A')
    assert.equal(r.type, 'response')
    assert.equal(r.id, 4242)
    assert.equal(rcode(r), 'NOERROR')
    assert.ok((r.flags ?? 0) & dnsPacket.RECURSION_AVAILABLE)
    assert.deepEqual(
      r.questions?.map((q) => [q.name, q.type]),
      [['api.openai.com', 'A']],
    )
    assert.equal(r.answers?.length, 1)
    assert.equal(r.answers?.[0]?.type, 'A')
    assert.equal(data(r.answers?.[0]), names.addressOf('api.openai.com'))
  })

  test('AAAA: no data (NOERROR, no answer), so every client connects over IPv4 to the fake address', () => {
    const r = ask(new FakeNames(), 'api.openai.com', 'AAAA')
    assert.equal(rcode(r), 'NOERROR')
    assert.deepEqual(r.answers, [])
  })

  test('localhost and *.localhost answer loopback (the command`s own), never a fake address', () => {
    const names = new FakeNames()
    assert.equal(data(ask(names, 'localhost', 'A').answers?.[0]), '127.0.0.1')
    assert.equal(data(ask(names, 'app.localhost', 'A').answers?.[0]), '127.0.0.1')
    assert.equal(data(ask(names, 'localhost', 'AAAA').answers?.[0]), '::1')
    assert.equal(names.nameOf('198.18.0.1'), undefined)
  })

  test('PTR of a fake address names it; other types get no data', () => {
    const names = new FakeNames()
    const address = names.addressOf('db.internal')
    const reversed = `${address.split('.').reverse().join('.')}.in-addr.arpa`
    assert.equal(data(ask(names, reversed, 'PTR').answers?.[0]), 'db.internal')
    for (const type of ['MX', 'TXT', 'SRV', 'UNKNOWN_65'] as RecordType[]) {
      const r = ask(names, 'api.openai.com', type)
      assert.equal(rcode(r), 'NOERROR', type)
      assert.deepEqual(r.answers, [], type)
    }
  })

  test('garbage and responses get no answer (the resolver times out rather than being fed nonsense)', () => {
    const names = new FakeNames()
    assert.equal(answerQuery(Buffer.from('not dns'), names), undefined)
    const response = dnsPacket.encode({ type: 'response', id: 1, questions: [{ type: 'A', name: 'x.test' }], answers: [] })
    assert.equal(answerQuery(response, names), undefined)
  })

  test('names that run out of addresses get SERVFAIL, not a wrong address', () => {
    const names = new FakeNames(1)
    ask(names, 'a.test', 'A')
    const r = ask(names, 'b.test', 'A')
    assert.equal(rcode(r), 'SERVFAIL')
    assert.deepEqual(r.answers, [])
  })
})

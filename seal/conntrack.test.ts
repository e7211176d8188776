import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { ConntrackReader, originalDestinations, parseConntrackLine } from './conntrack.ts'

// Lines as /proc/<pid>/net/nf_conntrack prints them (kernel 6.x), captured from a sealed run's namespace.
const TCP_REDIRECTED =
  'ipv4     2 tcp      6 431999 ESTABLISHED src=198.18.0.9 dst=198.18.0.9 sport=39994 dport=8443 src=127.0.0.1 dst=198.18.0.9 sport=15001 dport=39994 [ASSURED] mark=0 zone=0 use=2'
const TCP_TIME_WAIT =
  'ipv4     2 tcp      6 118 TIME_WAIT src=198.18.0.2 dst=198.18.0.2 sport=40000 dport=443 src=127.0.0.1 dst=198.18.0.2 sport=15001 dport=40000 [ASSURED] mark=0 zone=0 use=2'
const UDP_UNREPLIED =
  'ipv4     2 udp      17 29 src=198.18.0.4 dst=198.18.0.4 sport=51000 dport=123 [UNREPLIED] src=127.0.0.1 dst=198.18.0.4 sport=15003 dport=51000 mark=0 zone=0 use=2'
const TCP6 =
  'ipv6     10 tcp      6 431999 ESTABLISHED src=2001:db8::7 dst=2001:db8::7 sport=41000 dport=80 src=::1 dst=2001:db8::7 sport=15001 dport=41000 [ASSURED] mark=0 zone=0 use=2'
// A loopback connection of the command's own: not redirected, the reply comes from the port it called.
const OWN_LOOPBACK =
  'ipv4     2 tcp      6 431999 ESTABLISHED src=127.0.0.1 dst=127.0.0.1 sport=42000 dport=3000 src=127.0.0.1 dst=127.0.0.1 sport=3000 dport=42000 [ASSURED] mark=0 zone=0 use=2'

describe('conntrack lines', () => {
  test('a redirected TCP connection: the original tuple holds where the client meant to go', () => {
    const e = parseConntrackLine(TCP_REDIRECTED)
    assert.deepEqual(e, {
      family: 4,
      protocol: 'tcp',
      original: { src: '198.18.0.9', dst: '198.18.0.9', sport: 39994, dport: 8443 },
      reply: { src: '127.0.0.1', dst: '198.18.0.9', sport: 15001, dport: 39994 },
    })
  })

  test('UDP with [UNREPLIED] between the tuples, and IPv6 addresses', () => {
    assert.deepEqual(parseConntrackLine(UDP_UNREPLIED)?.original, { src: '198.18.0.4', dst: '198.18.0.4', sport: 51000, dport: 123 })
    const six = parseConntrackLine(TCP6)
    assert.equal(six?.family, 6)
    assert.deepEqual(six?.original.dst, '2001:db8::7')
    assert.equal(six?.reply.sport, 15001)
  })

  test('lines that are not entries give undefined', () => {
    for (const line of ['', 'ipv4 2 tcp 6 10 ESTABLISHED src=1.2.3.4', 'garbage', 'ipv4 2 icmp 1 29 src=1.1.1.1 dst=2.2.2.2 type=8 code=0 id=1']) {
      assert.equal(parseConntrackLine(line), undefined, line)
    }
  })
})

describe('original destinations, looked up by the listener port and the client port', () => {
  const table = [OWN_LOOPBACK, TCP_TIME_WAIT, TCP_REDIRECTED, UDP_UNREPLIED, TCP6].join('\n')

  test('each key finds its own entry, by protocol and family', () => {
    const found = originalDestinations(table, [
      { protocol: 'tcp', listenerPort: 15001, client: { address: '198.18.0.9', port: 39994 } },
      { protocol: 'tcp', listenerPort: 15001, client: { address: '198.18.0.2', port: 40000 } },
      { protocol: 'udp', listenerPort: 15003, client: { address: '198.18.0.4', port: 51000 } },
      { protocol: 'tcp', listenerPort: 15001, client: { address: '2001:0db8:0::7', port: 41000 } },
      { protocol: 'udp', listenerPort: 15001, client: { address: '198.18.0.9', port: 39994 } },
      { protocol: 'tcp', listenerPort: 15001, client: { address: '127.0.0.1', port: 42000 } },
    ])
    assert.deepEqual(found, [
      { address: '198.18.0.9', port: 8443 },
      { address: '198.18.0.2', port: 443 },
      { address: '198.18.0.4', port: 123 },
      { address: '2001:db8::7', port: 80 },
      undefined,
      undefined,
    ])
  })

  test('a tuple reused while its old entry lingers in TIME_WAIT: the live entry wins', () => {
    const reused = TCP_TIME_WAIT.replace('118 TIME_WAIT', '431999 ESTABLISHED').replace('dport=443', 'dport=9443')
    for (const lines of [
      [TCP_TIME_WAIT, reused],
      [reused, TCP_TIME_WAIT],
    ]) {
      const found = originalDestinations(lines.join('\n'), [{ protocol: 'tcp', listenerPort: 15001, client: { address: '198.18.0.2', port: 40000 } }])
      assert.deepEqual(found, [{ address: '198.18.0.2', port: 9443 }])
    }
  })
})

describe('ConntrackReader', () => {
  test('lookups made together share one read of the table', async () => {
    let reads = 0
    const reader = new ConntrackReader('/proc/x/net/nf_conntrack', async () => {
      reads++
      return [TCP_REDIRECTED, TCP_TIME_WAIT].join('\n')
    })
    const [a, b] = await Promise.all([
      reader.lookup({ protocol: 'tcp', listenerPort: 15001, client: { address: '198.18.0.9', port: 39994 } }),
      reader.lookup({ protocol: 'tcp', listenerPort: 15001, client: { address: '198.18.0.2', port: 40000 } }),
    ])
    assert.deepEqual(
      [a, b],
      [
        { address: '198.18.0.9', port: 8443 },
        { address: '198.18.0.2', port: 443 },
      ],
    )
    assert.equal(reads, 1)
  })

  test('an entry not there yet is looked for once more, then reported missing', async () => {
    let reads = 0
    const reader = new ConntrackReader('/x', async () => (++reads === 1 ? '' : TCP_REDIRECTED))
    assert.deepEqual(await reader.lookup({ protocol: 'tcp', listenerPort: 15001, client: { address: '198.18.0.9', port: 39994 } }), {
      address: '198.18.0.9',
      port: 8443,
    })
    assert.equal(reads, 2)
    const never = new ConntrackReader('/x', async () => '')
    assert.equal(await never.lookup({ protocol: 'tcp', listenerPort: 1, client: { address: '198.18.0.1', port: 2 } }), undefined)
  })

  test('an unreadable table rejects every waiting lookup with the read error', async () => {
    const reader = new ConntrackReader('/x', async () => {
      throw Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES' })
    })
    await assert.rejects(reader.lookup({ protocol: 'tcp', listenerPort: 1, client: { address: '198.18.0.1', port: 2 } }), /EACCES/)
  })
})

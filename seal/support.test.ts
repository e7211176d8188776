import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { ErrorCodes } from '../trace/index.ts'
import { parseBridges } from './bridges.ts'
import { hostsFile, nsswitchFile, writeResolverFiles } from './resolver-files.ts'
import { refusalError, sealSupport, unsupportedError } from './support.ts'

const root = mkdtempSync(join(tmpdir(), 'tr-seal-support-'))
after(() => rmSync(root, { recursive: true, force: true }))

/** A fake /proc/sys with the given values. */
function procSys(values: Record<string, string>): string {
  const dir = mkdtempSync(join(root, 'proc-'))
  for (const [path, value] of Object.entries(values)) {
    mkdirSync(join(dir, path, '..'), { recursive: true })
    writeFileSync(join(dir, path), `${value}\n`)
  }
  return dir
}

describe('whether a sealed run can be set up here', () => {
  test('not Linux: one failed check naming the platform and the fix; the typed error says it never runs unsealed', () => {
    const s = sealSupport({ platform: 'darwin' })
    assert.equal(s.ok, false)
    assert.deepEqual(
      s.checks.map((c) => [c.name, c.ok]),
      [['platform', false]],
    )
    const err = unsupportedError(s)
    assert.equal(err.code, ErrorCodes.SEAL_UNAVAILABLE)
    assert.match(err.message, /^Failed to seal the command: platform: darwin: sealed runs use Linux namespaces\. Fix: run the command in a Linux container/)
    assert.match(err.message, /never falls back to an unsealed one/)
  })

  test('a non-root user where unprivileged user namespaces are disabled: each sysctl named with the command that fixes it', () => {
    const disabled = procSys({
      'proc/sys/kernel/unprivileged_userns_clone': '0',
      'proc/sys/user/max_user_namespaces': '0',
      'proc/sys/kernel/apparmor_restrict_unprivileged_userns': '1',
    })
    const s = sealSupport({ platform: 'linux', uid: 1000, root: disabled })
    assert.equal(s.ok, false)
    assert.equal(s.unprivileged, true)
    const failed = s.checks.filter((c) => !c.ok)
    const fixes = failed.map((c) => c.fix ?? '').join('\n')
    assert.match(fixes, /sudo sysctl -w kernel\.unprivileged_userns_clone=1/)
    assert.match(fixes, /sudo sysctl -w user\.max_user_namespaces=15000/)
    assert.match(fixes, /sudo sysctl -w kernel\.apparmor_restrict_unprivileged_userns=0/)
    assert.match(unsupportedError(s).message, /AppArmor: kernel\.apparmor_restrict_unprivileged_userns=1/)
  })

  test('a non-root user where they are allowed, and root, who needs none', () => {
    const allowed = procSys({ 'proc/sys/kernel/unprivileged_userns_clone': '1', 'proc/sys/user/max_user_namespaces': '63000' })
    const user = sealSupport({ platform: 'linux', uid: 1000, root: allowed })
    assert.deepEqual(
      user.checks.find((c) => c.name === 'user namespaces'),
      { name: 'user namespaces', ok: true, detail: 'unprivileged user namespaces allowed' },
    )
    const asRoot = sealSupport({ platform: 'linux', uid: 0, root: allowed })
    assert.equal(asRoot.unprivileged, false)
    assert.match(asRoot.checks.find((c) => c.name === 'user namespaces')?.detail ?? '', /not needed/)
  })

  test('a refusal read from unshare, and a failed step of the helper, each with its fix', () => {
    const refused = refusalError({ stderr: 'unshare: unshare failed: Operation not permitted\n' }, { unprivileged: true })
    assert.equal(refused.code, ErrorCodes.SEAL_UNAVAILABLE)
    assert.match(
      refused.message,
      /the kernel refused to create the run's namespaces \(unshare said: unshare: unshare failed: Operation not permitted\)\. Fix: /,
    )
    const nft = refusalError({ kind: 'failed', step: 'nft', detail: 'Error: Could not process rule: No such file or directory' }, { unprivileged: false })
    assert.match(nft.message, /`nft` could not load the redirect rules \(Error: Could not process rule: No such file or directory\)\. Fix: .*modprobe/)
  })
})

describe('--bridge', () => {
  test('a loopback port, a port to an address, a name, a name and port', () => {
    assert.deepEqual(parseBridges(['5432', '6379=10.0.0.7:6380', 'DB=127.0.0.1:5432', 'cache:11211=[::1]:11211']), [
      { kind: 'port', port: 5432, to: { host: '127.0.0.1', port: 5432 } },
      { kind: 'port', port: 6379, to: { host: '10.0.0.7', port: 6380 } },
      { kind: 'name', name: 'db', to: { host: '127.0.0.1', port: 5432 } },
      { kind: 'name', name: 'cache', port: 11211, to: { host: '::1', port: 11211 } },
    ])
  })

  test('anything else is TR_INVALID_OPTION with the accepted forms', () => {
    for (const bad of ['', '0', '70000', 'db', 'db=host', 'db=host:0', 'db:x=1.2.3.4:5', '5432=', '-x=1.2.3.4:5']) {
      assert.throws(
        () => parseBridges([bad]),
        (e: Error & { code?: string }) => e.code === ErrorCodes.INVALID_OPTION && /expected PORT .*NAME\[:PORT\]=ADDRESS:PORT/.test(e.message),
        bad,
      )
    }
  })
})

describe('resolver files', () => {
  test('nsswitch keeps every database but hosts, which asks files then DNS only', () => {
    const host =
      'passwd:         files systemd\ngroup:          files systemd\n\nhosts:          files mdns4_minimal [NOTFOUND=return] resolve dns myhostname\nnetworks:       files\n'
    const out = nsswitchFile(host)
    assert.match(out, /^passwd: {9}files systemd$/m)
    assert.match(out, /^networks: {7}files$/m)
    assert.deepEqual(out.match(/^hosts:.*$/gm), ['hosts: files dns'])
    assert.deepEqual(nsswitchFile(undefined).match(/^hosts:.*$/gm), ['hosts: files dns'])
  })

  test('hosts: loopback names and this machine`s name only', () => {
    assert.equal(
      hostsFile('ci-runner-7'),
      '# Tool Replay sealed run\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\tci-runner-7\n',
    )
    assert.doesNotMatch(hostsFile('bad name\n10.0.0.1 evil'), /evil/)
  })

  test('the fstab binds each file over a target that exists (escaped as fstab(5) wants), and the CA bundle over the system`s', async () => {
    const etc = mkdtempSync(join(root, 'etc '))
    writeFileSync(join(etc, 'resolv.conf'), 'nameserver 10.0.0.1\n')
    writeFileSync(join(etc, 'nsswitch.conf'), 'hosts: files resolve\n')
    const dir = mkdtempSync(join(root, 'files-'))
    const fstab = await writeResolverFiles(dir, { etc })
    const { readFileSync } = await import('node:fs')
    const lines = readFileSync(fstab, 'utf8').trim().split('\n')
    assert.deepEqual(lines, [
      `${join(dir, 'resolv.conf')} ${join(etc, 'resolv.conf').replace(' ', '\\040')} none bind 0 0`,
      `${join(dir, 'nsswitch.conf')} ${join(etc, 'nsswitch.conf').replace(' ', '\\040')} none bind 0 0`,
    ])
    assert.match(readFileSync(join(dir, 'resolv.conf'), 'utf8'), /^nameserver 127\.0\.0\.1$/m)
  })
})

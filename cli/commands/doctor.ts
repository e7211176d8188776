import { probeSeal, type SealCheck, sealSupport } from '../../seal/index.ts'
import { ErrorCodes } from '../../trace/index.ts'
import { EXIT_CODES } from '../exit-codes.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy doctor`: whether sealed runs work on this machine (each check, then a real set-up), and how to fix what does not. */
export const doctorCommand: CommandModule = {
  command: 'doctor',
  describe: 'Say whether sealed runs (--sealed) work on this machine: each requirement, then a real set-up; what fails comes with its fix',
  builder: (y) => y,
  run: async (args, io) => {
    const support = sealSupport()
    const probe = support.ok ? await probeSeal() : undefined
    const ok = probe?.ok === true
    const setUp: SealCheck | undefined = probe && {
      name: 'set-up',
      ok: probe.ok,
      detail: probe.ok
        ? `namespaces, routes, nft rules, mounts and connection tracking in ${probe.setupMs} ms (${probe.totalMs} ms from start to ready)`
        : probe.error.message,
    }
    const checks = setUp ? [...support.checks, setUp] : support.checks
    if (args.json) {
      io.out(JSON.stringify({ ok, sealed: { ok, checks, ...(probe?.ok ? { setupMs: probe.setupMs, totalMs: probe.totalMs } : {}) } }))
    } else {
      io.out(`Sealed runs (--sealed): ${ok ? 'work on this machine' : 'do NOT work on this machine'}.`)
      for (const c of checks) {
        io.out(`  ${c.ok ? 'ok  ' : 'FAIL'}  ${c.name.padEnd(16)} ${c.detail}`)
        if (!c.ok && c.fix) io.out(`        ${''.padEnd(16)} fix: ${c.fix}`)
      }
      if (!ok) io.out('Without --sealed, runs work as before: only clients that honour the proxy variables are captured.')
    }
    return ok ? 0 : EXIT_CODES[ErrorCodes.SEAL_UNAVAILABLE]
  },
}

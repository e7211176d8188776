#!/usr/bin/env node
// Entry point of the `tr-proxy` command. A published package runs the compiled dist/. A checkout (the
// TypeScript sources are beside this file) always runs the sources, which Node >= 22.18 runs directly by
// stripping types: a dist/ left over from an older build can never run stale code.
import { existsSync } from 'node:fs'
import nodeModule from 'node:module'

const [major, minor] = process.versions.node.split('.').map(Number)
if (major < 22 || (major === 22 && minor < 19)) {
  process.stderr.write(`tr-proxy needs Node >= 22.19 (this is ${process.version}).\n`)
  process.exit(64)
}
const cliModule = (name) => {
  const source = new URL(`../cli/${name}.ts`, import.meta.url)
  return existsSync(source) ? source.href : new URL(`../dist/cli/${name}.js`, import.meta.url).href
}
// import, export and assets start again (same pid and stdio) with fewer malloc arenas (cli/malloc-arenas.ts).
// Before process.stdout or process.stderr is touched: opening a pipe makes it non-blocking, a flag the new
// process would take for the pipe's own and leave behind for the shell or parent that shares it.
const { relaunchForStreaming } = await import(cliModule('malloc-arenas'))
relaunchForStreaming()
// A reader that went away (`tr-proxy replay ... 2>&1 | head -1`) must not turn the exit code into 1: the
// EPIPE error event would otherwise crash the process; later writes are skipped (cli/output.ts).
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err) => {
    if (err.code !== 'EPIPE' && err.code !== 'ERR_STREAM_DESTROYED') throw err
  })
}
// V8's compiled code for the modules a start loads (ours, undici, yargs, the certificate library) is kept on disk
// (Node's compile cache, in <tmp>/node-compile-cache, as tsc and npm keep theirs), so a second start skips most of
// the compiling; NODE_DISABLE_COMPILE_CACHE=1 turns it off. Nothing of the store goes there.
nodeModule.enableCompileCache?.()
const { runCli } = await import(cliModule('main'))
process.exitCode = await runCli(process.argv.slice(2))

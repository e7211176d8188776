// Stops an npm script on a Node too old for the TypeScript sources (type stripping needs >= 22.19) with what to
// run instead, before Node fails on the first .ts file with a bare ERR_UNKNOWN_FILE_EXTENSION. Preloaded by the
// scripts that run .ts files (`node --import ./scripts/require-node.mjs ...`: demo, bench) and imported first
// by run-tests.mjs (npm test).
const [major, minor] = process.versions.node.split('.').map(Number)
if (major < 22 || (major === 22 && minor < 19)) {
  const script = process.env.npm_lifecycle_event
  const command = script === undefined || script === 'test' ? 'npm test' : `npm run ${script}`
  console.error(`Tool Replay needs Node >= 22.19 (this is v${process.versions.node}). Run: PATH="$(scripts/ensure-node.sh 22):$PATH" ${command}`)
  process.exit(1)
}

/**
 * `tool-replay/cases`, the public entry: emit a trace as a self-contained regression case, and verify one
 * (what a generated test calls). The folder's door for sibling folders is `./index.ts`; what is exported
 * here is a decision, pinned by e2e/public-surface.test.ts.
 */

export type { CaseExpectation, CaseFramework, CaseManifest, CaseRun, EmitCaseOptions, EmittedCase, VerifyOptions, VerifyResult } from './index.ts'
export { emitCase, verifyCase } from './index.ts'

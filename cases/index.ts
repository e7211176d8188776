/** Regression cases: emit a trace as a self-contained, verifiable case directory, and verify one. */

export type { EmitCaseOptions, EmittedCase } from './emit.ts'
export { emitCase } from './emit.ts'
export { DEFAULT_CASES_IMPORT, renderTest, testFileName } from './generated-test.ts'
export type { CaseExpectation, CaseFramework, CaseManifest, CaseRun, IntactCase } from './manifest.ts'
export { CASE_FORMAT, CASE_VERSION, FRAMEWORKS, MANIFEST_FILE, parseManifest, renderManifest, traceFileName } from './manifest.ts'
export type { VerifyOptions, VerifyResult } from './verify.ts'
export { checkCaseIntegrity, verifyCase } from './verify.ts'

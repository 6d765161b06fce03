// A reporter that fails the run when any scenario did not run and pass:
// skipped (test.skip, test.fixme, a failed beforeAll), or marked as expected
// to fail. A suite that quietly stops testing something must not pass.

import type { FullConfig, FullResult, Reporter, Suite, TestCase } from "@playwright/test/reporter";

export default class NoSkips implements Reporter {
  private root?: Suite;

  onBegin(_config: FullConfig, suite: Suite) {
    this.root = suite;
  }

  async onEnd(result: FullResult): Promise<{ status?: FullResult["status"] } | undefined> {
    const notRun = (this.root?.allTests() ?? []).filter(
      (t: TestCase) => t.outcome() === "skipped" || t.expectedStatus !== "passed",
    );
    if (notRun.length === 0) return undefined;
    console.error(`\n[e2e] ${notRun.length} scenario(s) did not run and pass, so the run fails:`);
    for (const t of notRun) console.error(`  - ${t.titlePath().filter(Boolean).join(" › ")} (${t.outcome()})`);
    return { status: result.status === "passed" ? "failed" : result.status };
  }
}

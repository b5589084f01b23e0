"""The parity scripts' counter: every check passes or fails, and the last line a script prints is
"N passed, N failed[, N skipped]", the line tests/run.sh adds up."""


class Tally:
    def __init__(self, verbose=False):
        self.passed = self.failed = self.skipped = 0
        self.verbose = verbose  # print passing checks too, not only failures

    def check(self, ok, what, detail=""):
        ok = bool(ok)
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        if self.verbose or not ok:
            print(f"{'ok  ' if ok else 'FAIL'} {what}" + (f": {detail}" if detail else ""))
        return ok

    def skip(self, what, why):
        self.skipped += 1
        print(f"skipped: {what}: {why}")

    def summary(self):
        """Prints the closing line; returns the exit status."""
        print(f"{self.passed} passed, {self.failed} failed" + (f", {self.skipped} skipped" if self.skipped else ""))
        return 1 if self.failed else 0

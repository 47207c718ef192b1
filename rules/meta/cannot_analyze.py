from __future__ import annotations

from perflint.rule import FileError, RawFinding, Rule, Valid


class CannotAnalyze(Rule):
    """## What it does
    Reports a file perflint could not analyze: a syntax error, bytes that are not valid
    source in the file's encoding, NUL bytes, an unreadable file, a broken symbolic link or a
    symbolic link loop, or nesting too deep to analyze; and a directory whose files cannot be
    listed (no permission), so none of them is checked.

    ## Why is this bad?
    A file that cannot be analyzed is a file whose host-device syncs nobody checks. The run
    goes on with the other files; this line makes sure the gap is visible.

    ## Example
    ```python
    def forward(self, x)
        return x
    ```

    ## Use instead
    ```python
    def forward(self, x):
        return x
    ```
    """

    code = "PFL001"
    name = "cannot-analyze"
    message = "cannot analyze file: {reason}"
    family = "meta"
    hot_only = False
    triggers = ()
    valid = [Valid("x = 1\n")]

    def on_file_error(self, error: FileError) -> RawFinding:
        message = self.message if error.subject == "file" else f"cannot analyze {error.subject}: {{reason}}"
        return RawFinding(code=self.code, message=message.format(reason=error.message))

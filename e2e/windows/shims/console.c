/* console.exe PROGRAM [ARGS...]: runs PROGRAM with the console's CONIN$/CONOUT$ as its standard handles, for pseudoconsoles whose children Wine starts without any. */
#include <windows.h>

/* The command line after argv[0], split the way the C runtime splits it: a quoted argv[0] ends at
 * the next quote (no escapes apply to it), an unquoted one at the first space or tab. */
static wchar_t *after_program_name(wchar_t *line)
{
    if (*line == L'"') {
        line++;
        while (*line && *line != L'"')
            line++;
        if (*line == L'"')
            line++;
    } else {
        while (*line && *line != L' ' && *line != L'\t')
            line++;
    }
    while (*line == L' ' || *line == L'\t')
        line++;
    return line;
}

/* Writes a message to CONOUT$ if there is one, else to the inherited standard error. */
static void complain(HANDLE out, const char *text)
{
    DWORD written;
    if (out == INVALID_HANDLE_VALUE)
        out = GetStdHandle(STD_ERROR_HANDLE);
    if (out && out != INVALID_HANDLE_VALUE)
        WriteFile(out, text, lstrlenA(text), &written, NULL);
}

/* Ctrl+C and Ctrl+Break reach every process on the console: the child decides what they mean,
 * and the launcher keeps waiting for it. A handler routine, unlike SetConsoleCtrlHandler(NULL,
 * TRUE), is not inherited by the child. */
static BOOL WINAPI keep_waiting(DWORD event)
{
    return event == CTRL_C_EVENT || event == CTRL_BREAK_EVENT;
}

int wmain(void)
{
    SECURITY_ATTRIBUTES inherit = {sizeof inherit, NULL, TRUE};
    HANDLE in = CreateFileW(L"CONIN$", GENERIC_READ | GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE, &inherit,
                            OPEN_EXISTING, 0, NULL);
    HANDLE out = CreateFileW(L"CONOUT$", GENERIC_READ | GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE, &inherit,
                             OPEN_EXISTING, 0, NULL);
    wchar_t *rest = after_program_name(GetCommandLineW());
    STARTUPINFOW si;
    PROCESS_INFORMATION pi;
    DWORD code = 127;
    char message[160];
    wchar_t *line;

    if (!*rest) {
        complain(out, "usage: console.exe PROGRAM [ARGS...]\r\n");
        return 2;
    }
    if (in == INVALID_HANDLE_VALUE || out == INVALID_HANDLE_VALUE) {
        wsprintfA(message, "console.exe: no console to attach (error %lu)\r\n", GetLastError());
        complain(out, message);
        return 127;
    }
    SetConsoleCtrlHandler(keep_waiting, TRUE);

    ZeroMemory(&si, sizeof si);
    si.cb = sizeof si;
    si.dwFlags = STARTF_USESTDHANDLES;
    si.hStdInput = in;
    si.hStdOutput = out;
    si.hStdError = out;
    /* CreateProcessW may write to its command line argument: give it a copy. */
    line = HeapAlloc(GetProcessHeap(), 0, (lstrlenW(rest) + 1) * sizeof *line);
    if (!line) {
        complain(out, "console.exe: out of memory\r\n");
        return 127;
    }
    lstrcpyW(line, rest);
    if (!CreateProcessW(NULL, line, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi)) {
        wsprintfA(message, "console.exe: cannot start the program (error %lu)\r\n", GetLastError());
        complain(out, message);
        return 127;
    }
    CloseHandle(pi.hThread);
    /* The launcher lives exactly as long as the program: whoever started it bounds the wait. */
    WaitForSingleObject(pi.hProcess, INFINITE);
    if (!GetExitCodeProcess(pi.hProcess, &code))
        code = 127;
    CloseHandle(pi.hProcess);
    return (int)code;
}

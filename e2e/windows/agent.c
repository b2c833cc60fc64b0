/* agent.exe MODE: Windows console agents in miniature for the runtime tests (readers, raw-mode agents, a process spawner), run on the console given as standard handles. */
#include <windows.h>

static HANDLE in, out;
/* AOCTL_AGENT_LOG=FILE: every byte read is appended to FILE as two hex digits and a space. */
static HANDLE byte_log = INVALID_HANDLE_VALUE;

static void say_n(const char *text, DWORD length)
{
    DWORD written;
    while (length > 0 && WriteFile(out, text, length, &written, NULL) && written > 0) {
        text += written;
        length -= written;
    }
}

static void say(const char *text)
{
    say_n(text, lstrlenA(text));
}

/* The next byte of standard input, or -1 at its end. */
static int next_byte(void)
{
    unsigned char c;
    DWORD n = 0;
    if (!ReadFile(in, &c, 1, &n, NULL) || n == 0)
        return -1;
    if (byte_log != INVALID_HANDLE_VALUE) {
        char hex[4];
        DWORD written;
        wsprintfA(hex, "%02x ", c);
        WriteFile(byte_log, hex, 3, &written, NULL);
    }
    return c;
}

/* One line of cooked input without its line ending; FALSE at the end of input. Longer lines are
 * cut, the rest read and dropped. */
static BOOL next_line(char *line, int size)
{
    int length = 0, c;
    while ((c = next_byte()) != -1) {
        if (c == '\n') {
            line[length] = 0;
            return TRUE;
        }
        if (c != '\r' && length < size - 1)
            line[length++] = (char)c;
    }
    line[length] = 0;
    return length > 0;
}

/* Sets the console input mode, exiting with a message if the console refuses it. */
static void input_mode(DWORD mode)
{
    char message[96];
    if (!SetConsoleMode(in, mode)) {
        wsprintfA(message, "agent: SetConsoleMode(input, 0x%lx) failed (error %lu)\r\n", mode, GetLastError());
        say(message);
        ExitProcess(4);
    }
}

/* Echo off, lines still edited and delivered whole. */
static void no_echo(void)
{
    input_mode(ENABLE_LINE_INPUT | ENABLE_PROCESSED_INPUT);
}

/* Raw input: bytes as typed, no echo, Ctrl+C a byte like any other; escape sequences as bytes
 * unless AOCTL_AGENT_VT_INPUT=0. Wine 8.0 ignores ENABLE_VIRTUAL_TERMINAL_INPUT: its conhost turns
 * every escape sequence it receives into key events, which reach ReadFile as no bytes at all. */
static void raw(void)
{
    char vt[4];
    DWORD length = GetEnvironmentVariableA("AOCTL_AGENT_VT_INPUT", vt, sizeof vt);
    BOOL off = length == 1 && vt[0] == '0';
    input_mode(off ? 0 : ENABLE_VIRTUAL_TERMINAL_INPUT);
}

/* Says `got: LINE`; not through wsprintf, whose output stops at 1024 characters. */
static void answer_line(const char *line)
{
    say("got: ");
    say(line);
    say("\r\n");
}

static int reader(void)
{
    char cwd[MAX_PATH + 1], value[512], line[4096], text[1200];
    if (!GetCurrentDirectoryA(sizeof cwd, cwd))
        cwd[0] = 0;
    if (GetEnvironmentVariableA("AOCTL_TEST", value, sizeof value) >= sizeof value)
        value[0] = 0;
    wsprintfA(text, "ready in %s with %s\r\n", cwd, value);
    say(text);
    while (next_line(line, sizeof line)) {
        if (lstrcmpA(line, "quit") == 0)
            return 3;
        answer_line(line);
    }
    return 0;
}

static int answering(BOOL answer)
{
    char line[4096];
    no_echo();
    say("ready\r\n");
    while (next_line(line, sizeof line)) {
        if (answer)
            answer_line(line);
    }
    return 0;
}

/* Starts `agent.exe ARGS` with the given creation flags; its process handle, or NULL. */
static HANDLE start_self(const wchar_t *args, DWORD flags, DWORD *pid)
{
    wchar_t self[MAX_PATH], line[MAX_PATH + 64];
    STARTUPINFOW si;
    PROCESS_INFORMATION pi;
    if (!GetModuleFileNameW(NULL, self, MAX_PATH))
        return NULL;
    wsprintfW(line, L"\"%s\" %s", self, args);
    ZeroMemory(&si, sizeof si);
    si.cb = sizeof si;
    if (!CreateProcessW(self, line, NULL, NULL, FALSE, flags, NULL, NULL, &si, &pi))
        return NULL;
    CloseHandle(pi.hThread);
    *pid = pi.dwProcessId;
    return pi.hProcess;
}

/* Leaves behind one child detached from the console that also tries to leave its parent's job
 * (the counterpart of setsid) and one on the console that ignores every console control
 * event, prints their pids, then waits for them. */
static int spawner(void)
{
    HANDLE children[2];
    DWORD orphan = 0, stubborn = 0;
    char text[64];
    const DWORD detached = DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP;
    children[0] = start_self(L"sleep 1000", detached | CREATE_BREAKAWAY_FROM_JOB, &orphan);
    if (!children[0])
        /* A job that does not allow breaking away refuses the flag: stay in it, detached still. */
        children[0] = start_self(L"sleep 1000", detached, &orphan);
    if (!children[0]) {
        wsprintfA(text, "agent: cannot start a child (error %lu)\r\n", GetLastError());
        say(text);
        return 4;
    }
    wsprintfA(text, "orphan: %lu\r\n", orphan);
    say(text);
    children[1] = start_self(L"sleep 1001 stubborn", 0, &stubborn);
    if (!children[1]) {
        wsprintfA(text, "agent: cannot start a child (error %lu)\r\n", GetLastError());
        say(text);
        return 4;
    }
    wsprintfA(text, "stubborn: %lu\r\n", stubborn);
    say(text);
    say("ready\r\n");
    /* Bounded by the children's own sleeps. */
    WaitForMultipleObjects(2, children, TRUE, INFINITE);
    return 0;
}

static BOOL WINAPI ignore_everything(DWORD event)
{
    (void)event;
    return TRUE;
}

static int sleeper(const wchar_t *seconds, const wchar_t *how)
{
    DWORD n = 0;
    for (; *seconds >= L'0' && *seconds <= L'9'; seconds++)
        n = n * 10 + (DWORD)(*seconds - L'0');
    if (how && lstrcmpW(how, L"stubborn") == 0)
        SetConsoleCtrlHandler(ignore_everything, TRUE);
    Sleep(n * 1000);
    return 0;
}

/* Bracketed paste on: echoes what it gets and, on Enter outside a paste, reports how many paste
 * blocks and lines the message had. Under Wine 8.0 the paste markers never arrive (see raw()). */
static int paste(void)
{
    int blocks = 0, lines = 1, inside = 0, c;
    char text[64];
    raw();
    say("\x1b[?2004hready\r\n> ");
    while ((c = next_byte()) != -1) {
        if (c == 0x1b) {
            char seq[32];
            int length = 0;
            seq[length++] = (char)c;
            for (;;) {
                int d = next_byte();
                if (d == -1)
                    return 0;
                if (length < (int)sizeof seq - 1)
                    seq[length++] = (char)d;
                if ((d >= 'a' && d <= 'z') || (d >= 'A' && d <= 'Z') || d == '~')
                    break;
            }
            seq[length] = 0;
            if (lstrcmpA(seq, "\x1b[200~") == 0) {
                blocks++;
                inside = 1;
            } else if (lstrcmpA(seq, "\x1b[201~") == 0) {
                inside = 0;
            }
            continue;
        }
        if (c == '\r' || c == '\n') {
            if (inside) {
                lines++;
                say("\r\n");
                continue;
            }
            wsprintfA(text, "\r\nblocks=%d lines=%d\r\n> ", blocks, lines);
            say(text);
            blocks = 0;
            lines = 1;
            continue;
        }
        say_n((const char *)&c, 1);
    }
    return 0;
}

/* Drops the first Enter it is sent, as agents do while still starting, then answers lines. */
static int loses_first_enter(void)
{
    char line[1024];
    int length = 0, lost = 0, c;
    raw();
    say("ready\r\n> ");
    while ((c = next_byte()) != -1) {
        if (c == '\r') {
            if (!lost) {
                lost = 1;
                continue;
            }
            line[length] = 0;
            say("\r\ngot: ");
            say(line);
            say("\r\n> ");
            length = 0;
            continue;
        }
        if (length < (int)sizeof line - 1)
            line[length++] = (char)c;
        say_n((const char *)&c, 1);
    }
    return 0;
}

/* Asks for the cursor position before drawing anything and prints the answer without its ESC.
 * Under Wine 8.0 the answer never arrives: its conhost reads `ESC [ row ; col R` as a key (F3). */
static int query(void)
{
    char answer[64];
    int length = 0, c;
    raw();
    say("\r\n\r\nabc\x1b[6n");
    while (length < (int)sizeof answer - 1 && (c = next_byte()) != -1) {
        answer[length++] = (char)c;
        if (c == 'R')
            break;
    }
    answer[length] = 0;
    say("\r\nready ");
    say(length > 0 ? answer + 1 : answer);
    say("\r\n");
    return 0;
}

/* Says `ready`, then on every line read the console window's size as `size COLSxROWS`. */
static int size(void)
{
    char line[256], text[64];
    say("ready\r\n");
    while (next_line(line, sizeof line)) {
        CONSOLE_SCREEN_BUFFER_INFO info;
        if (GetConsoleScreenBufferInfo(out, &info))
            wsprintfA(text, "size %dx%d\r\n", info.srWindow.Right - info.srWindow.Left + 1,
                      info.srWindow.Bottom - info.srWindow.Top + 1);
        else
            wsprintfA(text, "size unknown (error %lu)\r\n", GetLastError());
        say(text);
    }
    return 0;
}

static const char usage[] =
    "usage: agent.exe reader|no-echo|silent|spawner|paste|loses-first-enter|query|size|sleep SECONDS [stubborn]\r\n";

int wmain(int argc, wchar_t **argv)
{
    char path[MAX_PATH];
    DWORD mode, length;
    in = GetStdHandle(STD_INPUT_HANDLE);
    out = GetStdHandle(STD_OUTPUT_HANDLE);
    if (GetConsoleMode(out, &mode))
        SetConsoleMode(out, mode | ENABLE_PROCESSED_OUTPUT | ENABLE_VIRTUAL_TERMINAL_PROCESSING);
    length = GetEnvironmentVariableA("AOCTL_AGENT_LOG", path, sizeof path);
    if (length > 0 && length < sizeof path)
        byte_log = CreateFileA(path, FILE_APPEND_DATA, FILE_SHARE_READ | FILE_SHARE_WRITE, NULL, OPEN_ALWAYS,
                               FILE_ATTRIBUTE_NORMAL, NULL);
    if (argc < 2) {
        say(usage);
        return 2;
    }
    if (lstrcmpW(argv[1], L"reader") == 0)
        return reader();
    if (lstrcmpW(argv[1], L"no-echo") == 0)
        return answering(TRUE);
    if (lstrcmpW(argv[1], L"silent") == 0)
        return answering(FALSE);
    if (lstrcmpW(argv[1], L"spawner") == 0)
        return spawner();
    if (lstrcmpW(argv[1], L"paste") == 0)
        return paste();
    if (lstrcmpW(argv[1], L"loses-first-enter") == 0)
        return loses_first_enter();
    if (lstrcmpW(argv[1], L"query") == 0)
        return query();
    if (lstrcmpW(argv[1], L"size") == 0)
        return size();
    if (lstrcmpW(argv[1], L"sleep") == 0 && argc >= 3)
        return sleeper(argv[2], argc >= 4 ? argv[3] : NULL);
    say(usage);
    return 2;
}

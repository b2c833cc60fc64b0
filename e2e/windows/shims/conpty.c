/* conpty.dll for Wine 8.0: forwards the pseudoconsole calls to kernel32, without PSEUDOCONSOLE_INHERIT_CURSOR (Wine's conhost rejects `--inheritcursor`), and resizes from a process attached to the pseudoconsole where kernel32 cannot. */

/* Keep the SDK's own declarations of these functions (dllimport from kernel32) out of the way. */
#define _WIN32_WINNT 0x0601
#define NTDDI_VERSION 0x06010000
#include <windows.h>

typedef void *HPCON;
typedef HRESULT(WINAPI *create_fn)(COORD, HANDLE, HANDLE, DWORD, HPCON *);
typedef HRESULT(WINAPI *resize_fn)(HPCON, COORD);
typedef void(WINAPI *close_fn)(HPCON);

#define INHERIT_CURSOR 0x1
/* ProcThreadAttributeValue(22, FALSE, TRUE, FALSE), hidden by the version defines above. */
#define ATTRIBUTE_PSEUDOCONSOLE 0x00020016
/* How long a resize may take before it is given up. */
#define RESIZE_TIMEOUT_MS 5000

static HINSTANCE this_dll;

/* A kernel32 export, as the generic function type that casts to any other without a warning. */
typedef void (*any_fn)(void);
static any_fn kernel32(const char *name)
{
    HMODULE module = GetModuleHandleA("kernel32.dll");
    return module ? (any_fn)(void *)GetProcAddress(module, name) : NULL;
}

__declspec(dllexport) HRESULT WINAPI CreatePseudoConsole(COORD size, HANDLE input, HANDLE output, DWORD flags,
                                                         HPCON *console)
{
    create_fn create = (create_fn)kernel32("CreatePseudoConsole");
    if (!create)
        return HRESULT_FROM_WIN32(ERROR_PROC_NOT_FOUND);
    return create(size, input, output, flags & ~(DWORD)INHERIT_CURSOR, console);
}

static int parse_number(const char **text)
{
    int n = 0;
    while (**text == ' ')
        (*text)++;
    while (**text >= '0' && **text <= '9')
        n = n * 10 + *(*text)++ - '0';
    return n;
}

/* `rundll32 conpty.dll,ResizeAttachedConsole COLS ROWS`, run attached to a pseudoconsole: sets its
 * screen buffer and window to COLS x ROWS, as a resizing conhost does. The window may never be
 * larger than the buffer, so it shrinks first, then the buffer changes, then the window grows.
 * Exits 0 on success, 2 for bad arguments, 3 without a console, 4 if the console refuses. */
__declspec(dllexport) void CALLBACK ResizeAttachedConsole(HWND window, HINSTANCE instance, LPSTR args, int show)
{
    const char *text = args;
    int cols = parse_number(&text), rows = parse_number(&text);
    HANDLE out;
    CONSOLE_SCREEN_BUFFER_INFO info;
    SMALL_RECT view;
    COORD size;
    (void)window;
    (void)instance;
    (void)show;

    if (cols <= 0 || rows <= 0 || cols > 0x7fff || rows > 0x7fff)
        ExitProcess(2);
    out = CreateFileW(L"CONOUT$", GENERIC_READ | GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE, NULL,
                      OPEN_EXISTING, 0, NULL);
    if (out == INVALID_HANDLE_VALUE || !GetConsoleScreenBufferInfo(out, &info))
        ExitProcess(3);
    view.Left = 0;
    view.Top = 0;
    view.Right = (SHORT)(min(cols, info.srWindow.Right - info.srWindow.Left + 1) - 1);
    view.Bottom = (SHORT)(min(rows, info.srWindow.Bottom - info.srWindow.Top + 1) - 1);
    size.X = (SHORT)cols;
    size.Y = (SHORT)rows;
    if (!SetConsoleWindowInfo(out, TRUE, &view) || !SetConsoleScreenBufferSize(out, size))
        ExitProcess(4);
    view.Right = (SHORT)(cols - 1);
    view.Bottom = (SHORT)(rows - 1);
    ExitProcess(SetConsoleWindowInfo(out, TRUE, &view) ? 0 : 4);
}

/* Wine 8.0's ResizePseudoConsole is a stub returning E_NOTIMPL, and its conhost ignores the resize
 * signal. A process attached to the pseudoconsole can still resize it with the ordinary console
 * calls: this DLL, run by rundll32 with the pseudoconsole as its console. */
static HRESULT resize_from_inside(HPCON console, COORD size)
{
    wchar_t dll[MAX_PATH], system[MAX_PATH], exe[MAX_PATH + 16], line[2 * MAX_PATH + 64];
    STARTUPINFOEXW si;
    PROCESS_INFORMATION pi;
    SIZE_T attributes_size = 0;
    DWORD code = 1, error;
    BOOL started;

    if (!GetModuleFileNameW(this_dll, dll, MAX_PATH) || !GetSystemDirectoryW(system, MAX_PATH))
        return HRESULT_FROM_WIN32(GetLastError());
    wsprintfW(exe, L"%s\\rundll32.exe", system);
    wsprintfW(line, L"\"%s\" \"%s\",ResizeAttachedConsole %d %d", exe, dll, size.X, size.Y);

    ZeroMemory(&si, sizeof si);
    si.StartupInfo.cb = sizeof si;
    InitializeProcThreadAttributeList(NULL, 1, 0, &attributes_size);
    si.lpAttributeList = HeapAlloc(GetProcessHeap(), 0, attributes_size);
    if (!si.lpAttributeList)
        return E_OUTOFMEMORY;
    if (!InitializeProcThreadAttributeList(si.lpAttributeList, 1, 0, &attributes_size)) {
        error = GetLastError();
        HeapFree(GetProcessHeap(), 0, si.lpAttributeList);
        return HRESULT_FROM_WIN32(error);
    }
    started = UpdateProcThreadAttribute(si.lpAttributeList, 0, ATTRIBUTE_PSEUDOCONSOLE, console, sizeof console, NULL,
                                        NULL) &&
              CreateProcessW(exe, line, NULL, NULL, FALSE, EXTENDED_STARTUPINFO_PRESENT, NULL, NULL, &si.StartupInfo,
                             &pi);
    error = GetLastError();
    DeleteProcThreadAttributeList(si.lpAttributeList);
    HeapFree(GetProcessHeap(), 0, si.lpAttributeList);
    if (!started)
        return HRESULT_FROM_WIN32(error);

    CloseHandle(pi.hThread);
    if (WaitForSingleObject(pi.hProcess, RESIZE_TIMEOUT_MS) != WAIT_OBJECT_0) {
        TerminateProcess(pi.hProcess, 1);
        CloseHandle(pi.hProcess);
        return HRESULT_FROM_WIN32(ERROR_TIMEOUT);
    }
    if (!GetExitCodeProcess(pi.hProcess, &code))
        code = 1;
    CloseHandle(pi.hProcess);
    return code == 0 ? S_OK : E_FAIL;
}

__declspec(dllexport) HRESULT WINAPI ResizePseudoConsole(HPCON console, COORD size)
{
    resize_fn resize = (resize_fn)kernel32("ResizePseudoConsole");
    HRESULT result = resize ? resize(console, size) : E_NOTIMPL;
    if (result == E_NOTIMPL)
        result = resize_from_inside(console, size);
    return result;
}

__declspec(dllexport) void WINAPI ClosePseudoConsole(HPCON console)
{
    close_fn close = (close_fn)kernel32("ClosePseudoConsole");
    if (close)
        close(console);
}

BOOL WINAPI DllMain(HINSTANCE instance, DWORD reason, LPVOID reserved)
{
    (void)reserved;
    if (reason == DLL_PROCESS_ATTACH)
        this_dll = instance;
    return TRUE;
}

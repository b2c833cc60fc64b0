/* bcryptprimitives.dll for Wine 8.0, which lacks it: ProcessPrng, which the Rust standard library (1.78+) needs, forwarded to advapi32's RtlGenRandom. */
#include <windows.h>

/* advapi32 exports RtlGenRandom under this name. */
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

/* Fills `data` with random bytes. Documented to always return TRUE; RtlGenRandom takes a ULONG
 * length, so larger requests are filled in chunks. */
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    const SIZE_T chunk = 0x40000000;
    while (length > 0) {
        ULONG n = (ULONG)(length < chunk ? length : chunk);
        if (!SystemFunction036(data, n)) {
            /* The documented contract has no failure: there is nothing better to do than retry. */
            Sleep(1);
            continue;
        }
        data += n;
        length -= n;
    }
    return TRUE;
}

BOOL WINAPI DllMain(HINSTANCE instance, DWORD reason, LPVOID reserved)
{
    (void)instance;
    (void)reason;
    (void)reserved;
    return TRUE;
}

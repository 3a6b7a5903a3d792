/* The start-up benchmark's program (tests/benches/mpi_startup.rs): each rank prints the
 * wall-clock time (CLOCK_REALTIME, nanoseconds) at which its MPI_Init returned, then
 * finalizes. */
#include <mpi.h>
#include <stdio.h>
#include <time.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    printf("init %lld\n", (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}

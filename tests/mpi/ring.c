/* The MPI check program of tests/tests/e2e/mpi.rs: every rank prints its rank, the
 * size and its host; an MPI_Allreduce of the ranks is checked against n(n-1)/2; a
 * barrier; then each rank exchanges a large buffer with its neighbours in a ring
 * (MPI_Sendrecv) and checks what arrived. Prints "ok RANK" and exits 0 when every check
 * holds, exits 3 otherwise.
 *
 * With an argument "abort R", rank R calls MPI_Abort(MPI_COMM_WORLD, 7) after the
 * barrier; with "hang", every rank sleeps after printing "ready RANK" (for the kill
 * scenarios); with "spin S", every rank burns CPU for S seconds of wall-clock time after
 * the barrier (for the market scenario), then goes on; with "nofinalize", every rank
 * returns 0 after its checks without calling MPI_Finalize (a job that must fail). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BIG (4 * 1024 * 1024)

int main(int argc, char **argv) {
    int rank, size, len;
    char host[MPI_MAX_PROCESSOR_NAME];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    printf("rank %d of %d on %s\n", rank, size, host);
    fflush(stdout);

    long mine = rank, sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    long want = (long)size * (size - 1) / 2;
    if (sum != want) {
        printf("rank %d: allreduce gave %ld, want %ld\n", rank, sum, want);
        return 3;
    }
    MPI_Barrier(MPI_COMM_WORLD);

    if (argc > 2 && strcmp(argv[1], "abort") == 0 && atoi(argv[2]) == rank) {
        printf("aborting %d\n", rank);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 7);
    }
    if (argc > 1 && strcmp(argv[1], "hang") == 0) {
        printf("ready %d\n", rank);
        fflush(stdout);
        for (;;) sleep(1);
    }

    if (argc > 2 && strcmp(argv[1], "spin") == 0) {
        time_t end = time(NULL) + atoi(argv[2]);
        volatile unsigned long spins = 0;
        while (time(NULL) < end) spins++;
    }

    unsigned char *out = malloc(BIG), *in = malloc(BIG);
    if (!out || !in) return 3;
    for (int i = 0; i < BIG; i++) out[i] = (unsigned char)(rank * 31 + i);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    MPI_Sendrecv(out, BIG, MPI_BYTE, next, 1, in, BIG, MPI_BYTE, prev, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    for (int i = 0; i < BIG; i++) {
        if (in[i] != (unsigned char)(prev * 31 + i)) {
            printf("rank %d: byte %d from rank %d is wrong\n", rank, i, prev);
            return 3;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("ok %d sum %ld\n", rank, sum);
    free(out);
    free(in);
    if (argc > 1 && strcmp(argv[1], "nofinalize") == 0) return 0;
    MPI_Finalize();
    return 0;
}

/* In-process A/B of libvigilio's cost: run under LD_PRELOAD=bin/libvigilio.so. Wrapped write()
 * and open()+close() on /dev/shm against the same raw syscalls, interleaved in blocks of
 * 5,000 (1,000 pairs) so drift and other load hit both; prints medians of 200 blocks.
 * The raw calls go to glibc's syscall() itself, looked up in libc.so.6: the library wraps
 * syscall() too (openat2), and its wrapper must not be part of the baseline.
 * Build: gcc -O2 -o /tmp/ab overhead_ab.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
static long (*sys)(long,...);
int main(int argc,char**argv){
  void*libc=dlopen("libc.so.6",RTLD_NOW|RTLD_NOLOAD);
  if(!libc||!(sys=(long(*)(long,...))dlsym(libc,"syscall"))){fprintf(stderr,"no libc syscall\n");return 2;}
  int R=200,B=5000; char buf[1024]={0}; double dw[200],dc[200];
  int fd=open("/dev/shm/vio_ab",O_WRONLY|O_CREAT|O_TRUNC,0644);
  for(int r=0;r<R;r++){
    lseek(fd,0,SEEK_SET);
    double t0=now(); for(int i=0;i<B;i++) write(fd,buf,1024);
    double t1=now(); for(int i=0;i<B;i++) sys(SYS_write,fd,buf,1024);
    double t2=now(); dw[r]=((t1-t0)-(t2-t1))/B*1e9;
    t0=now(); for(int i=0;i<B/5;i++){int f=open("/dev/shm/vio_ab2",O_WRONLY|O_CREAT,0644);close(f);}
    t1=now(); for(int i=0;i<B/5;i++){int f=sys(SYS_openat,AT_FDCWD,"/dev/shm/vio_ab2",O_WRONLY|O_CREAT,0644);sys(SYS_close,f);}
    t2=now(); dc[r]=((t1-t0)-(t2-t1))/(B/5)*1e9;
  }
  qsort(dw,R,sizeof*dw,cmp); qsort(dc,R,sizeof*dc,cmp);
  printf("added ns per 1 KiB write: median %.1f (p25 %.1f p75 %.1f); per open+close: median %.1f (p25 %.1f p75 %.1f)\n",dw[R/2],dw[R/4],dw[3*R/4],dc[R/2],dc[R/4],dc[3*R/4]);
  close(fd); unlink("/dev/shm/vio_ab"); unlink("/dev/shm/vio_ab2"); return 0;}

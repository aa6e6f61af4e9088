/* hub.h — the published datasets from the Hugging Face Hub, fetched as the reference's
 * builders fetch them (huggingface_hub's hf_hub_download(repo, file, repo_type="dataset")),
 * into the same cache, so that files either one downloaded serve the other:
 *   URL    {HF_ENDPOINT or https://huggingface.co}/datasets/{repo}/resolve/{revision}/{file},
 *          HF_TOKEN sent as "Authorization: Bearer" when set (not to a CDN it redirects to)
 *   cache  {HF_HUB_CACHE, or HF_HOME/hub, or ~/.cache/huggingface/hub}/datasets--{owner}--{name}/
 *          blobs/{etag}, snapshots/{commit}/{file} -> ../../blobs/{etag}, refs/{revision}
 * A file already in the cache is used as it is; otherwise it is downloaded by the system's
 * curl (trm links no TLS library) into blobs/{etag}.incomplete, resumed where it stopped,
 * its size checked against the Hub's, then renamed into place, under the same lock file
 * huggingface_hub takes (.locks/datasets--{owner}--{name}/{etag}.lock). Without a network
 * (HF_HUB_OFFLINE=1, no curl, the Hub unreachable) the cache's refs/{revision} names the
 * snapshot to use. */
#ifndef TRM_HUB_H
#define TRM_HUB_H

#include "util/util.h"

/* Fetches `files` of dataset `repo` ("owner/name") at one commit (main's, as the Hub or, when
 * offline, the cache says) and returns the snapshot directory that holds them all (free it).
 * `progress`: a progress line on stderr while downloading. */
char *trm_hub_dataset_dir(const char *repo, const char *const *files, int nfiles, int progress, trm_err *e);

/* The CSV builders' choice between --csv-dir DIR and --download [--repo R]: with download,
 * fetches train.csv and test.csv of repo (default_repo when NULL) and points *csv_dir at
 * their snapshot directory (*owned: the string to free). Errors: both or neither given,
 * --repo without --download, the fetch's own. */
int trm_hub_csv_dir(const char **csv_dir, int download, const char *repo, const char *default_repo, int progress,
                    char **owned, trm_err *e);

#endif

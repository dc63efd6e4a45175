# The dgm image: the `dgm` CLI and everything it runs (collectors, the Spark driver of
# `dgm analyze`, the Streamlit dashboard, the lab). Used by docker-compose.yml.
#
# bookworm, not the default python:3.11-slim (trixie): trixie has no OpenJDK 17 package.
FROM python:3.11-slim-bookworm

# Spark version of the standalone cluster in docker-compose.yml (apache/spark image tag).
# The driver's pyspark must be the same version as the master and workers it talks to.
ARG SPARK_VERSION=4.0.0

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# A headless JRE 17 for the pyspark driver (Spark 4 runs on Java 17 or 21).
# (The man1 directory is missing from slim images and the JRE's postinst needs it.)
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*

# uid/gid 185 like the "spark" user of the apache/spark image, so files the Spark executors
# write into the shared state volume belong to the same user as the dgm services.
RUN groupadd --system --gid 185 dgm \
    && useradd --system --uid 185 --gid dgm --create-home --home-dir /home/dgm dgm \
    && mkdir -p /var/lib/dgm /etc/dgm \
    && chown dgm:dgm /var/lib/dgm

WORKDIR /src

# Dependencies first, from pyproject.toml alone, so a code change does not re-download them;
# at the exact versions the tests ran with (constraints.txt, written by .ci/freeze_constraints.py).
COPY pyproject.toml constraints.txt ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
    && pip install --no-cache-dir -c constraints.txt -r /tmp/requirements.txt "pyspark==${SPARK_VERSION}" \
    && rm /tmp/requirements.txt

# Then the project itself (.dockerignore keeps tests, caches and state out of the context).
COPY . ./
RUN pip install --no-cache-dir -c constraints.txt . "pyspark==${SPARK_VERSION}"

USER dgm
WORKDIR /var/lib/dgm
CMD ["dgm", "--help"]
